import { describe, expect, it } from "vitest";

import type { RankedArchitecture } from "../api/types";
import { rankedPairs, rankingOption } from "./enasRanking";

const entry = (trial: number, shared: number | null, alone: number | null): RankedArchitecture => ({
  trial_id: trial,
  knobs: { arch: [trial] },
  shared_score: shared,
  standalone_trial_id: alone === null ? null : trial + 100,
  standalone_score: alone,
});

describe("ENAS ranking", () => {
  it("pairs each finalist's shared-weight score with its stand-alone score, when it was trained alone", () => {
    const ranking = [entry(7, 0.62, 0.81), entry(8, 0.6, null), entry(9, null, 0.7)];
    expect(rankedPairs(ranking)).toEqual([[0.62, 0.81, 7]]);
    const built = rankingOption(ranking);
    expect([built.shown, built.total]).toEqual([1, 3]);
    const series = built.option.series as { data: [number, number, number][] }[];
    expect(series[0].data).toEqual([[0.62, 0.81, 7]]);
  });

  it("says so when no finalist was trained alone yet", () => {
    const built = rankingOption([entry(7, 0.62, null)]);
    expect(built.shown).toBe(0);
    expect(JSON.stringify(built.option)).toContain("no finalist trained alone yet");
  });
});
