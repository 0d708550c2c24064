import { describe, expect, it } from "vitest";

import type { Placement } from "../api/types";
import { placementOption, placementSummary } from "./placement";

const placement: Placement = {
  method: "search",
  fallback: null,
  predictions: [
    ["2026-11-27T10:00:00+00:00", "2026-11-27T10:30:00+00:00", 0.8],
    ["2026-11-27T10:05:00+00:00", "2026-11-27T10:25:00+00:00", 0.95],
  ],
};

describe("placement", () => {
  it("sums up the latest prediction and, once the job ended, how far off it was", () => {
    const running = placementSummary(placement, null);
    expect(running.predicted).toBe(Date.parse("2026-11-27T10:25:00Z"));
    expect(running.utilisation).toBe(0.95);
    expect(running.error).toBeNull();
    const ended = placementSummary(placement, "2026-11-27T10:27:00+00:00");
    expect(ended.error).toBe(-120); // it ended two minutes after the last prediction
  });

  it("draws each prediction against its time, and the actual finish once known", () => {
    const built = placementOption(placement, "2026-11-27T10:27:00+00:00");
    expect(built.shown).toBe(2);
    const series = built.option.series as { name: string; data: [number, number][] }[];
    expect(series.map((s) => s.name)).toEqual(["predicted finish", "actual finish"]);
    expect(series[0].data[1]).toEqual([Date.parse("2026-11-27T10:05:00Z"), Date.parse("2026-11-27T10:25:00Z")]);
    expect(series[1].data.every(([, y]) => y === Date.parse("2026-11-27T10:27:00Z"))).toBe(true);
    expect((placementOption(placement, null).option.series as unknown[]).length).toBe(1);
  });

  it("says so when nothing was predicted yet", () => {
    const empty = placementOption({ method: "search", fallback: "no completed trial yet", predictions: [] }, null);
    expect(empty.shown).toBe(0);
    expect(placementSummary({ method: "search", fallback: null, predictions: [] }, null).predicted).toBeNull();
  });
});
