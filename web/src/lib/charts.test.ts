import { describe, expect, it } from "vitest";

import type { MetricRow, TrialPoint } from "../api/types";
import {
  bestSoFar,
  knobAxes,
  metricCurvesOption,
  PARALLEL_LINES,
  SCATTER_POINTS,
  parallelOption,
  sampleBest,
  scoreScatterOption,
  thinScatter,
} from "./charts";

const T0 = Date.parse("2030-01-01T00:00:00Z");

function trial(id: number, score: number | null, seconds: number, extra: Partial<TrialPoint> = {}): TrialPoint {
  return {
    id,
    number: id - 1,
    model_id: 1,
    status: score === null ? "RUNNING" : "COMPLETED",
    score,
    finished_ms: score === null ? null : T0 + seconds * 1000,
    knobs: { lr: 0.001 * id, layers: (id % 3) + 1, act: id % 2 ? "relu" : "tanh", early: false },
    policies: { EARLY_STOP: id % 2 === 0 },
    ...extra,
  };
}

function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 16807) % 2147483647;
    return s / 2147483647;
  };
}

describe("bestSoFar", () => {
  it("keeps only the improvements, in finish order, and extends to the last finish", () => {
    const points = [trial(1, 0.5, 30), trial(2, 0.7, 10), trial(3, 0.6, 20), trial(4, 0.9, 40), trial(5, 0.8, 50), trial(6, null, 0)];
    expect(bestSoFar(points)).toEqual([
      [T0 + 10_000, 0.7],
      [T0 + 40_000, 0.9],
      [T0 + 50_000, 0.9],
    ]);
  });

  it("is empty without scored trials", () => {
    expect(bestSoFar([trial(1, null, 0)])).toEqual([]);
  });
});

describe("thinScatter", () => {
  it("keeps at most about max points, the best of each cell, and the overall best", () => {
    const next = random(7);
    const points = Array.from({ length: 10_000 }, (_, i) => ({ x: next(), y: next(), i }));
    const kept = thinScatter(points, 400);
    expect(kept.length).toBeLessThanOrEqual(400);
    expect(kept.length).toBeGreaterThan(300);
    const best = points.reduce((a, b) => (b.y > a.y ? b : a));
    expect(kept).toContain(best);
  });

  it("leaves small sets alone", () => {
    const points = [{ x: 1, y: 1 }, { x: 2, y: 2 }];
    expect(thinScatter(points, 10)).toBe(points);
  });
});

describe("scoreScatterOption", () => {
  it("makes one series per policy combination", () => {
    const built = scoreScatterOption([trial(1, 0.5, 1), trial(2, 0.6, 2), trial(3, 0.7, 3)]);
    const series = built.option.series as { name: string; data: unknown[] }[];
    expect(series.map((s) => [s.name, s.data.length])).toEqual([
      ["EARLY_STOP", 1],
      ["no policy", 2],
    ]);
    expect(built.shown).toBe(3);
  });

  it("downsamples 10,000 trials and says how many it shows", () => {
    const next = random(3);
    const points = Array.from({ length: 10_000 }, (_, i) => trial(i + 1, next(), i));
    const built = scoreScatterOption(points, 2000);
    expect(built.total).toBe(10_000);
    expect(built.shown).toBeLessThanOrEqual(2000);
    const drawn = (built.option.series as { data: unknown[] }[]).reduce((n, s) => n + s.data.length, 0);
    expect(drawn).toBe(built.shown);
    expect(built.option.animation).toBe(false); // thousands of points draw at once
    expect(scoreScatterOption(points.slice(0, 10)).option.animation).toBe(true);
  });
});

describe("a job of 150,000 trials", () => {
  it("is drawn downsampled, its score range found without spreading every score into one call", () => {
    const next = random(7);
    const many = Array.from({ length: 150_000 }, (_, i) => trial(i + 1, next(), i));
    const parallel = parallelOption(many, null);
    expect([parallel.shown, parallel.total]).toEqual([600, 150_000]);
    const scores = many.map((p) => p.score!);
    const visual = parallel.option.visualMap as { min: number; max: number };
    expect([visual.min, visual.max]).toEqual([scores.reduce((a, b) => Math.min(a, b)), scores.reduce((a, b) => Math.max(a, b))]);
    expect(scoreScatterOption(many).shown).toBeLessThanOrEqual(2_100);
  });
});

describe("parallelOption", () => {
  const config = {
    lr: { type: "FloatKnob" as const, value_min: 1e-4, value_max: 1, is_exp: true },
    layers: { type: "IntegerKnob" as const, value_min: 1, value_max: 3, is_exp: false },
    act: { type: "CategoricalKnob" as const, values: ["tanh", "relu"] },
    epochs: { type: "FixedKnob" as const, value: 3 },
    early: { type: "PolicyKnob" as const, policy: "EARLY_STOP" },
  };

  it("has an axis per searched knob, typed from the knob config, and the score last", () => {
    const built = parallelOption([trial(1, 0.5, 1), trial(2, 0.9, 2)], config);
    const axes = built.option.parallelAxis as { name: string; type: string; data?: string[] }[];
    expect(axes.map((a) => [a.name, a.type])).toEqual([
      ["lr", "log"],
      ["layers", "value"],
      ["act", "category"],
      ["score", "value"],
    ]);
    expect(axes[2].data).toEqual(["tanh", "relu"]);
    const data = (built.option.series as { data: unknown[][] }[])[0].data;
    expect(data[0]).toEqual([0.002, 3, "tanh", 0.9]); // best first
  });

  it("guesses the axes from the values without a config", () => {
    const axes = knobAxes([trial(1, 0.5, 1)], null);
    expect(axes.map((a) => [a.name, a.kind])).toEqual([
      ["lr", "value"],
      ["layers", "value"],
      ["act", "category"],
      ["early", "category"],
    ]);
  });

  it("draws at most max lines: the best quarter and an even sample of the rest", () => {
    const points = Array.from({ length: 5000 }, (_, i) => trial(i + 1, i / 5000, i));
    const built = parallelOption(points, config, 400);
    expect(built.shown).toBe(400);
    expect(built.total).toBe(5000);
    const scores = (built.option.series as { data: number[][] }[])[0].data.map((row) => row[row.length - 1]);
    expect(scores.slice(0, 100)).toEqual(Array.from({ length: 100 }, (_, i) => (4999 - i) / 5000));
    expect(Math.min(...scores)).toBeLessThan(0.01);
  });

  it("samples evenly", () => {
    expect(sampleBest([9, 8, 7, 6, 5, 4, 3, 2, 1, 0], 4)).toEqual([9, 8, 5, 2]);
  });
});

describe("metricCurvesOption", () => {
  it("draws one LTTB-sampled line per trial of the chosen metric, skipping missing values", () => {
    const rows = (values: (number | null)[]): MetricRow[] =>
      values.map((v, step): MetricRow => ({ step, time: "", metrics: v === null ? { loss: 1 } : { acc: v, loss: 1 } }));
    const metrics = new Map([
      [7, rows([0.1, 0.2, null, 0.4])],
      [9, rows([0.3])],
    ]);
    const built = metricCurvesOption(metrics, "acc", new Map([[7, "#6"]]));
    const series = built.option.series as { name: string; data: number[][]; sampling: string }[];
    expect(series.map((s) => s.name)).toEqual(["#6", "trial 9"]);
    expect(series[0].data).toEqual([
      [0, 0.1],
      [1, 0.2],
      [3, 0.4],
    ]);
    expect(series[0].sampling).toBe("lttb");
    expect(built.shown).toBe(4);
  });

  it("says so when there is nothing to draw", () => {
    const built = metricCurvesOption(new Map(), null, new Map());
    expect(built.shown).toBe(0);
    expect(JSON.stringify(built.option)).toContain("no interim metrics");
  });
});

describe("trials the server's sample left out", () => {
  it("count in the totals of the scatter and of parallel coordinates, not in what is drawn", () => {
    const points = [trial(1, 0.5, 1), trial(2, 0.9, 2)];
    const scatter = scoreScatterOption(points, SCATTER_POINTS, 98);
    expect([scatter.shown, scatter.total]).toEqual([2, 100]);
    const parallel = parallelOption(points, null, PARALLEL_LINES, 8);
    expect([parallel.shown, parallel.total]).toEqual([2, 10]);
    expect(scoreScatterOption(points).total).toBe(2);
  });
});
