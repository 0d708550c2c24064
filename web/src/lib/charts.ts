// ECharts options for the job and trial pages, built from plain data so that they can be
// tested without a canvas. Large jobs are downsampled here: the best-score line keeps only
// its steps (exact), scatters keep the best point of each cell of a grid, parallel
// coordinates keep the best trials and an even sample of the rest, and metric curves use
// ECharts' own LTTB sampling. The server picks the same trials of a large job before
// sending any (GET .../trials/sample, baobab/admin/_trial_points.py): what it left out is
// passed in as `omitted`, counted in each chart's total.

import type { KnobSpec, MetricRow, TrialPoint } from "../api/types";
import { formatScore, formatValue, policyLabel } from "./format";

// What setOption takes; kept loose so that this module needs no ECharts import.
export type ChartOption = Record<string, unknown>;

export interface Built {
  option: ChartOption;
  /** Points (or lines) drawn, and how many there were before downsampling. */
  shown: number;
  total: number;
}

export const PALETTE = ["#2f7d4f", "#d9822b", "#3b6fb6", "#a23b72", "#7a6f2b", "#2b8a8a", "#8a4b2b", "#5b5bb5"];
export const GRID = { left: 56, right: 24, top: 40, bottom: 48 };
/** The most points the score scatter draws, and lines parallel coordinates draw (the server samples a large job to these). */
export const SCATTER_POINTS = 2000;
export const PARALLEL_LINES = 600;
/** Above this many points a chart draws at once: entry animations of thousands of points keep the page busy. */
const ANIMATE_UP_TO = 500;

export function emptyOption(message: string): ChartOption {
  return {
    title: { text: message, left: "center", top: "middle", textStyle: { color: "#888", fontSize: 13, fontWeight: "normal" } },
    xAxis: { show: false },
    yAxis: { show: false },
    series: [],
  };
}

function scored(points: TrialPoint[]): { t: number; score: number; trial: TrialPoint }[] {
  const out: { t: number; score: number; trial: TrialPoint }[] = [];
  for (const trial of points) {
    const t = trial.finished_ms;
    if (trial.score !== null && t !== null) out.push({ t, score: trial.score, trial });
  }
  return out.sort((a, b) => a.t - b.t || a.trial.id - b.trial.id);
}

/** The best score so far, only where it improves, plus the last finish: a step line through these is exact. */
export function bestSoFar(points: TrialPoint[]): [number, number][] {
  const done = scored(points);
  const steps: [number, number][] = [];
  let best = -Infinity;
  for (const { t, score } of done) {
    if (score > best) {
      best = score;
      steps.push([t, score]);
    }
  }
  const last = done[done.length - 1];
  if (last && steps.length && last.t > steps[steps.length - 1][0]) steps.push([last.t, best]);
  return steps;
}

export function bestScoreOption(points: TrialPoint[]): Built {
  const steps = bestSoFar(points);
  if (!steps.length) return { option: emptyOption("no scored trial yet"), shown: 0, total: 0 };
  return {
    option: {
      color: [PALETTE[0]],
      grid: GRID,
      tooltip: { trigger: "axis", valueFormatter: (v: number) => formatScore(v) },
      xAxis: { type: "time" },
      yAxis: { type: "value", scale: true, name: "best score" },
      series: [{ type: "line", step: "end", data: steps, areaStyle: { opacity: 0.08 }, symbolSize: 5 }],
    },
    shown: steps.length,
    total: steps.length,
  };
}

/**
 * At most about `max` points: a grid of about `max` cells over the points' range keeps, in
 * each cell, the point with the highest y. The shape, the outliers and the best points stay.
 */
export function thinScatter<T extends { x: number; y: number }>(points: T[], max: number): T[] {
  if (points.length <= max) return points;
  const side = Math.max(1, Math.floor(Math.sqrt(max)));
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const p of points) {
    x0 = Math.min(x0, p.x);
    x1 = Math.max(x1, p.x);
    y0 = Math.min(y0, p.y);
    y1 = Math.max(y1, p.y);
  }
  const cellOf = (v: number, lo: number, hi: number) => (hi > lo ? Math.min(side - 1, Math.floor(((v - lo) / (hi - lo)) * side)) : 0);
  const cells = new Map<number, T>();
  for (const p of points) {
    const key = cellOf(p.x, x0, x1) * side + cellOf(p.y, y0, y1);
    const kept = cells.get(key);
    if (!kept || p.y > kept.y) cells.set(key, p);
  }
  return [...cells.values()];
}

/**
 * Every scored trial by finish time, one series (colour) per combination of policies.
 * `omitted`: scored trials not in `points` (the server's sample left them out), counted in the total.
 */
export function scoreScatterOption(points: TrialPoint[], max = SCATTER_POINTS, omitted = 0): Built {
  const done = scored(points);
  if (!done.length) return { option: emptyOption("no scored trial yet"), shown: 0, total: 0 };
  const groups = new Map<string, { x: number; y: number; id: number; number: number }[]>();
  for (const { t, score, trial } of done) {
    const label = policyLabel(trial.policies);
    if (!groups.has(label)) groups.set(label, []);
    groups.get(label)!.push({ x: t, y: score, id: trial.id, number: trial.number });
  }
  let shown = 0;
  const names = [...groups.keys()].sort();
  const series = names.map((name) => {
    const group = groups.get(name)!;
    const share = Math.max(50, Math.round((max * group.length) / done.length));
    const kept = thinScatter(group, share);
    shown += kept.length;
    return {
      type: "scatter",
      name,
      large: kept.length > 1000,
      symbolSize: done.length > 1000 ? 4 : 7,
      data: kept.map((p) => [p.x, p.y, p.number, p.id]),
    };
  });
  return {
    option: {
      animation: shown <= ANIMATE_UP_TO,
      color: PALETTE,
      grid: { ...GRID, top: 48 },
      legend: { top: 4, type: "scroll" },
      tooltip: {
        trigger: "item",
        formatter: (p: { seriesName: string; value: number[] }) =>
          `trial #${p.value[2]} · ${p.seriesName}<br/>score ${formatScore(p.value[1])}`,
      },
      dataZoom: [{ type: "inside", xAxisIndex: 0 }],
      xAxis: { type: "time" },
      yAxis: { type: "value", scale: true, name: "score" },
      series,
    },
    shown,
    total: done.length + omitted,
  };
}

/** The metric names the trials reported, sorted. */
export function metricNames(metrics: Map<number, MetricRow[]>): string[] {
  const names = new Set<string>();
  for (const rows of metrics.values()) for (const row of rows) for (const name of Object.keys(row.metrics)) names.add(name);
  return [...names].sort();
}

/** One curve per trial of the metric `name` against the step. */
export function metricCurvesOption(
  metrics: Map<number, MetricRow[]>,
  name: string | null,
  labels: Map<number, string>,
): Built {
  if (!name) return { option: emptyOption("no interim metrics reported by the selected trials"), shown: 0, total: 0 };
  let total = 0;
  const series = [...metrics.entries()].map(([trialId, rows]) => {
    const data = rows
      .filter((row) => typeof row.metrics[name] === "number" && Number.isFinite(row.metrics[name]))
      .map((row) => [row.step, row.metrics[name] as number]);
    total += data.length;
    return {
      type: "line",
      name: labels.get(trialId) ?? `trial ${trialId}`,
      data,
      sampling: "lttb",
      showSymbol: data.length <= 50,
      symbolSize: 5,
    };
  });
  return {
    option: {
      animation: total <= ANIMATE_UP_TO,
      color: PALETTE,
      grid: { ...GRID, top: 48 },
      legend: { top: 4, type: "scroll" },
      tooltip: { trigger: "axis", valueFormatter: (v: number) => formatValue(v) },
      xAxis: { type: "value", name: "step", minInterval: 1 },
      yAxis: { type: "value", scale: true, name },
      series,
    },
    shown: total,
    total,
  };
}

/** All metrics of one trial against the step (the trial page). */
export function trialMetricsOption(rows: MetricRow[]): Built {
  const names = metricNames(new Map([[0, rows]]));
  if (!names.length) return { option: emptyOption("this trial reported no interim metrics"), shown: 0, total: 0 };
  const series = names.map((name) => ({
    type: "line",
    name,
    sampling: "lttb",
    showSymbol: rows.length <= 50,
    data: rows
      .filter((row) => typeof row.metrics[name] === "number" && Number.isFinite(row.metrics[name]))
      .map((row) => [row.step, row.metrics[name] as number]),
  }));
  return {
    option: {
      color: PALETTE,
      grid: { ...GRID, top: 48 },
      legend: { top: 4 },
      tooltip: { trigger: "axis", valueFormatter: (v: number) => formatValue(v) },
      xAxis: { type: "value", name: "step", minInterval: 1 },
      yAxis: { type: "value", scale: true },
      series,
    },
    shown: rows.length,
    total: rows.length,
  };
}

interface Axis {
  name: string;
  kind: "value" | "log" | "category";
  categories: string[];
}

/** The axes of the searched knobs: from the template's knob config, else guessed from the values. */
export function knobAxes(points: TrialPoint[], config: Record<string, KnobSpec> | null): Axis[] {
  const axes: Axis[] = [];
  if (config) {
    for (const [name, spec] of Object.entries(config)) {
      if (spec.type === "FloatKnob" || spec.type === "IntegerKnob") {
        axes.push({ name, kind: spec.is_exp && spec.value_min > 0 ? "log" : "value", categories: [] });
      } else if (spec.type === "CategoricalKnob") {
        axes.push({ name, kind: "category", categories: spec.values.map(formatValue) });
      } else if (spec.type === "ArchKnob") {
        axes.push({ name, kind: "category", categories: [] });
      }
    }
  } else {
    const first = points.find((p) => p.score !== null);
    for (const [name, value] of Object.entries(first?.knobs ?? {})) {
      if (name in (first?.policies ?? {})) continue;
      axes.push({ name, kind: typeof value === "number" ? "value" : "category", categories: [] });
    }
  }
  for (const axis of axes) {
    if (axis.kind !== "category") continue;
    const seen = new Set(axis.categories);
    for (const p of points) {
      const label = formatValue(p.knobs[axis.name]);
      if (!seen.has(label)) {
        seen.add(label);
        axis.categories.push(label);
      }
    }
  }
  return axes;
}

/** The best quarter of `max` and an even sample of the rest, best first. */
export function sampleBest<T>(sortedBestFirst: T[], max: number): T[] {
  if (sortedBestFirst.length <= max) return sortedBestFirst;
  const top = Math.ceil(max / 4);
  const rest = sortedBestFirst.slice(top);
  const want = max - top;
  const sample: T[] = [];
  for (let i = 0; i < want; i++) sample.push(rest[Math.floor((i * rest.length) / want)]);
  return [...sortedBestFirst.slice(0, top), ...sample];
}

/** Parallel coordinates of the knobs against the score, coloured by score; `omitted` as in scoreScatterOption. */
export function parallelOption(
  points: TrialPoint[],
  config: Record<string, KnobSpec> | null,
  max = PARALLEL_LINES,
  omitted = 0,
): Built {
  const done = points.filter((p) => p.score !== null).sort((a, b) => b.score! - a.score! || a.id - b.id);
  if (!done.length) return { option: emptyOption("no scored trial yet"), shown: 0, total: 0 };
  const axes = knobAxes(done, config);
  const lines = sampleBest(done, max);
  for (const axis of axes) {
    if (axis.kind === "log" && lines.some((p) => !(typeof p.knobs[axis.name] === "number" && (p.knobs[axis.name] as number) > 0))) {
      axis.kind = "value";
    }
  }
  // Best first: the first and the last hold the range (spreading 100,000 scores into Math.max overflows the stack).
  const [low, high] = [done[done.length - 1].score!, done[0].score!];
  const parallelAxis = [
    ...axes.map((axis, dim) =>
      axis.kind === "category"
        ? { dim, name: axis.name, type: "category", data: axis.categories }
        : { dim, name: axis.name, type: axis.kind, scale: true },
    ),
    { dim: axes.length, name: "score", type: "value", scale: true },
  ];
  const data = lines.map((p) => [
    ...axes.map((axis) => (axis.kind === "category" ? formatValue(p.knobs[axis.name]) : (p.knobs[axis.name] as number))),
    p.score as number,
  ]);
  return {
    option: {
      animation: lines.length <= ANIMATE_UP_TO,
      parallel: { left: 48, right: 72, top: 48, bottom: 32 },
      parallelAxis,
      visualMap: {
        type: "continuous",
        dimension: axes.length,
        min: low,
        max: high > low ? high : low + 1,
        orient: "vertical",
        right: 4,
        top: "middle",
        itemHeight: 120,
        calculable: false,
        text: ["high", "low"],
        inRange: { color: ["#d9dde3", "#8fbf9f", "#2f7d4f", "#17402a"] },
      },
      series: [
        {
          type: "parallel",
          lineStyle: { width: 1, opacity: lines.length > 200 ? 0.35 : 0.7 },
          progressive: 500,
          data,
        },
      ],
    },
    shown: lines.length,
    total: done.length + omitted,
  };
}
