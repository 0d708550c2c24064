// The placement planner's predictions of a job against what happened: the job page's
// placement card and its chart (predicted finish at each moment of planning, and the
// actual finish once there is one).

import type { Placement } from "../api/types";
import type { Built } from "./charts";
import { emptyOption } from "./charts";
import { parseTime } from "./format";

export interface PlacementSummary {
  /** The latest predicted finish (ms since the epoch), or null when nothing was predicted. */
  predicted: number | null;
  utilisation: number | null;
  /** Predicted minus actual finish, in seconds, once the job finished (positive: it ended earlier). */
  error: number | null;
}

export function placementSummary(placement: Placement, finishedAt: string | null): PlacementSummary {
  const last = placement.predictions[placement.predictions.length - 1];
  const predicted = last ? parseTime(last[1]) : null;
  const actual = parseTime(finishedAt);
  return {
    predicted,
    utilisation: last ? last[2] : null,
    error: predicted !== null && actual !== null ? (predicted - actual) / 1000 : null,
  };
}

/** The predicted finish against the time it was predicted at, with the actual finish as a line once known. */
export function placementOption(placement: Placement, finishedAt: string | null): Built {
  const points: [number, number][] = [];
  for (const [at, finish] of placement.predictions) {
    const x = parseTime(at);
    const y = parseTime(finish);
    if (x !== null && y !== null) points.push([x, y]);
  }
  if (!points.length) return { option: emptyOption("no prediction yet"), shown: 0, total: 0 };
  const actual = parseTime(finishedAt);
  const series: Record<string, unknown>[] = [
    { name: "predicted finish", type: "line", step: "end", data: points, symbolSize: 5 },
  ];
  if (actual !== null) {
    series.push({
      name: "actual finish",
      type: "line",
      data: [
        [points[0][0], actual],
        [Math.max(points[points.length - 1][0], actual), actual],
      ],
      symbol: "none",
      lineStyle: { type: "dashed" },
    });
  }
  return {
    option: {
      color: ["#3b6fb6", "#2f7d4f"],
      grid: { left: 72, right: 24, top: 40, bottom: 48 },
      legend: { top: 0 },
      tooltip: { trigger: "axis" },
      xAxis: { type: "time", name: "predicted at" },
      yAxis: { type: "time", scale: true, name: "finish" },
      series,
    },
    shown: points.length,
    total: points.length,
  };
}
