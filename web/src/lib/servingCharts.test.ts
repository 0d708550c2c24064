import { describe, expect, it } from "vitest";

import type { InferenceStats, StatsPoint } from "../api/types";
import { batchSizeOption, latencyOption, requestsOption } from "./servingCharts";

const T0 = Date.parse("2030-01-01T00:00:00Z");

function point(seconds: number, requests: number, latency: [number, number] | null, batch: number | null): StatsPoint {
  return {
    time: new Date(T0 + seconds * 1000).toISOString(),
    requests,
    requests_per_s: requests / 10,
    p50_ms: latency?.[0] ?? null,
    p99_ms: latency?.[1] ?? null,
    batch_size: batch,
  };
}

const STATS: InferenceStats = {
  interval_s: 10,
  window_s: 3600,
  points: [point(10, 30, [2, 8], 3), point(20, 0, null, null), point(30, 5, [1.5, 4], 1)],
};

type Series = { name: string; data: [number, number | null][] };

describe("serving charts", () => {
  it("draws a line a measure against time, over the hour that ends at the last point", () => {
    const built = requestsOption(STATS);
    const option = built.option as { xAxis: { min: number; max: number }; series: Series[] };
    expect(option.xAxis).toMatchObject({ type: "time", min: T0 + 30_000 - 3_600_000, max: T0 + 30_000 });
    expect(option.series.map((s) => s.data)).toEqual([
      [
        [T0 + 10_000, 3],
        [T0 + 20_000, 0],
        [T0 + 30_000, 0.5],
      ],
    ]);
    expect([built.shown, built.total]).toEqual([3, 3]);
  });

  it("leaves gaps where nothing was answered or batched, not zeros", () => {
    const latency = latencyOption(STATS);
    const series = (latency.option as { series: Series[] }).series;
    expect(series.map((s) => s.name)).toEqual(["p50", "p99"]);
    expect(series.map((s) => s.data.map(([, v]) => v))).toEqual([
      [2, null, 1.5],
      [8, null, 4],
    ]);
    expect(latency.shown).toBe(4);
    const batch = batchSizeOption(STATS);
    expect((batch.option as { series: Series[] }).series[0].data.map(([, v]) => v)).toEqual([3, null, 1]);
    expect(batch.shown).toBe(2);
  });

  it("says when the first point will come, and when there are no stats at all", () => {
    const waiting = requestsOption({ ...STATS, interval_s: 5, points: [] });
    expect([waiting.shown, (waiting.option as { title: { text: string } }).title.text]).toEqual([0, "the first point comes within 5 s"]);
    expect((latencyOption(null).option as { title: { text: string } }).title.text).toBe("no stats yet");
  });
});
