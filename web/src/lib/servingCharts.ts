// ECharts options for the inference page: a running job's serving over the last hour, from
// the points of its predictor's `GET /stats` (one per interval, oldest first). A point with
// no answered request has no latency, and one with no batch no batch size: those are gaps
// in the lines, not zeros.

import type { InferenceStats, StatsPoint } from "../api/types";
import { type Built, type ChartOption, emptyOption, GRID, PALETTE } from "./charts";
import { formatValue, parseTime } from "./format";

interface Line {
  name: string;
  value: (point: StatsPoint) => number | null;
}

/** Lines of `stats` against time, the x axis spanning the window that ends at the last point. */
function linesOption(stats: InferenceStats | null, lines: Line[], axisName: string, unit: string, colour: number): Built {
  const points = (stats?.points ?? []).filter((point) => parseTime(point.time) !== null);
  if (!stats || !points.length) {
    const wait = stats ? `the first point comes within ${formatValue(stats.interval_s)} s` : "no stats yet";
    return { option: emptyOption(wait), shown: 0, total: 0 };
  }
  const end = parseTime(points[points.length - 1].time)!;
  let shown = 0;
  const series = lines.map((line) => {
    const data = points.map((point) => {
      const value = line.value(point);
      if (value !== null) shown += 1;
      return [parseTime(point.time)!, value];
    });
    return { type: "line", name: line.name, data, showSymbol: points.length <= 30, symbolSize: 5, connectNulls: false };
  });
  const option: ChartOption = {
    animation: false,
    color: PALETTE.slice(colour),
    grid: { ...GRID, top: lines.length > 1 ? 48 : 40 },
    legend: lines.length > 1 ? { top: 4 } : undefined,
    tooltip: {
      trigger: "axis",
      valueFormatter: (v: number | null) => (v === null || v === undefined ? "—" : `${formatValue(v)}${unit}`),
    },
    xAxis: { type: "time", min: end - stats.window_s * 1000, max: end },
    yAxis: { type: "value", name: axisName, min: 0 },
    series,
  };
  // Nothing is downsampled: `shown` counts the values drawn, gaps left out.
  return { option, shown, total: shown };
}

export function requestsOption(stats: InferenceStats | null): Built {
  return linesOption(stats, [{ name: "requests/s", value: (p) => p.requests_per_s }], "requests/s", "/s", 0);
}

export function latencyOption(stats: InferenceStats | null): Built {
  return linesOption(
    stats,
    [
      { name: "p50", value: (p) => p.p50_ms },
      { name: "p99", value: (p) => p.p99_ms },
    ],
    "ms",
    " ms",
    1,
  );
}

export function batchSizeOption(stats: InferenceStats | null): Built {
  return linesOption(stats, [{ name: "mean batch size", value: (p) => p.batch_size }], "queries", "", 2);
}
