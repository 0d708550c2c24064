// How well an ENAS search's shared weights ranked its finalists: each final evaluation's score
// on the shared weights against its score once trained alone (the final_train phase), for the
// job page. A ranking worth its name puts the points on a rising line.

import type { RankedArchitecture } from "../api/types";
import type { Built } from "./charts";
import { GRID, emptyOption } from "./charts";
import { formatScore } from "./format";

/** The finalists trained alone too, as [shared score, stand-alone score, trial id]. */
export function rankedPairs(ranking: RankedArchitecture[]): [number, number, number][] {
  const pairs: [number, number, number][] = [];
  for (const entry of ranking) {
    if (entry.shared_score !== null && entry.standalone_score !== null) {
      pairs.push([entry.shared_score, entry.standalone_score, entry.trial_id]);
    }
  }
  return pairs;
}

/** Shared-weight score (x) against stand-alone score (y) of the finalists trained alone. */
export function rankingOption(ranking: RankedArchitecture[]): Built {
  const pairs = rankedPairs(ranking);
  if (!pairs.length) return { option: emptyOption("no finalist trained alone yet"), shown: 0, total: ranking.length };
  return {
    option: {
      color: ["#a23b72"],
      grid: GRID,
      tooltip: {
        trigger: "item",
        formatter: (p: { value: [number, number, number] }) =>
          `trial ${p.value[2]}: ${formatScore(p.value[0])} shared, ${formatScore(p.value[1])} alone`,
      },
      xAxis: { type: "value", name: "score on the shared weights", scale: true },
      yAxis: { type: "value", name: "score trained alone", scale: true },
      series: [{ name: "finalists", type: "scatter", data: pairs, symbolSize: 10 }],
    },
    shown: pairs.length,
    total: ranking.length,
  };
}
