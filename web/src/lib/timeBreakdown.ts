// Where a train job's time went (GET /train_jobs/<app>/<version>/time_breakdown): one stacked
// bar of its trials' seconds per phase, and the legend with seconds and shares. A phase that
// takes much of the job (fusion profiling, waiting for a slot) is what a user should see first.

import type { TimeBreakdown } from "../api/types";
import type { Built } from "./charts";
import { emptyOption } from "./charts";
import { formatDuration } from "./format";

/** Each phase's label and colour, in the order of a trial's life (the API's `phases`). */
export const PHASES: Record<string, { label: string; color: string }> = {
  wait: { label: "waiting for a slot", color: "#9aa3ad" },
  fetch: { label: "loading template & data", color: "#3b6fb6" },
  warm_start: { label: "warm start", color: "#2b8a8a" },
  profile: { label: "fusion profiling", color: "#d9822b" },
  build: { label: "building the model", color: "#7a6f2b" },
  train: { label: "training", color: "#2f7d4f" },
  evaluate: { label: "evaluation", color: "#a23b72" },
  store: { label: "saving parameters", color: "#5b5bb5" },
};

export interface PhaseShare {
  phase: string;
  label: string;
  color: string;
  seconds: number;
  /** Of the job's total, from 0 to 1 (0 when nothing was measured yet). */
  share: number;
}

/** The phases in the API's order, with their seconds and share of the total. */
export function phaseShares(breakdown: TimeBreakdown): PhaseShare[] {
  const total = breakdown.total_s;
  return breakdown.phases.map((phase) => {
    const seconds = breakdown.seconds[phase] ?? 0;
    const known = PHASES[phase] ?? { label: phase, color: "#555555" };
    return { phase, ...known, seconds, share: total > 0 ? seconds / total : 0 };
  });
}

/** "1m 05s (27.0%)": a phase's seconds and share, as the legend and the tooltip say them. */
export function shareLabel(share: PhaseShare): string {
  return `${formatDuration(share.seconds)} (${(share.share * 100).toFixed(1)}%)`;
}

/** One horizontal bar stacked by phase (each phase a series), in percent of the job's time. */
export function timeBreakdownOption(breakdown: TimeBreakdown): Built {
  const shares = phaseShares(breakdown);
  if (breakdown.total_s <= 0) return { option: emptyOption("no trial has run yet"), shown: 0, total: 0 };
  const drawn = shares.filter((s) => s.seconds > 0);
  return {
    option: {
      color: drawn.map((s) => s.color),
      grid: { left: 16, right: 16, top: 8, bottom: 24, containLabel: true },
      tooltip: { trigger: "item" },
      xAxis: { type: "value", max: 100, axisLabel: { formatter: "{value}%" } },
      yAxis: { type: "category", data: ["all trials"], show: false },
      series: drawn.map((s) => ({
        name: s.label,
        type: "bar",
        stack: "time",
        barWidth: 36,
        data: [{ value: s.share * 100, seconds: s.seconds }],
        tooltip: { valueFormatter: () => shareLabel(s) },
        label: { show: s.share >= 0.08, formatter: `${Math.round(s.share * 100)}%`, color: "#fff" },
      })),
    },
    shown: drawn.length,
    total: drawn.length,
  };
}
