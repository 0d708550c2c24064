// A trial's fusion profile (job option options.fusion "auto") in words and rows: what the
// worker measured before the trial trained, by group size, and the size it chose for the later
// trials of the same structure.

import type { FusionMeasurement, FusionProfile } from "../api/types";
import { formatDuration } from "./format";

/**
 * A group size is chosen over training alone only when it trains at least this many times the
 * rows per second of size 1 (baobab.model.PAYS, applied by the worker; shown here, not applied).
 */
export const PAYS = 1.1;

/** True once the worker stored its measurement with the request. */
export function isMeasured(profile: FusionProfile): profile is FusionMeasurement {
  return "best" in profile;
}

export interface FusionRow {
  size: number;
  /** Training rows per second of all members together. */
  rate: number;
  /** `rate` over size 1's; null when size 1 has no rate above 0. */
  ratio: number | null;
  /** The size later trials of this structure train in. */
  chosen: boolean;
}

/** The measured sizes, smallest first, each with its ratio to training alone. */
export function fusionRows(profile: FusionMeasurement): FusionRow[] {
  const alone = profile.samples_per_s["1"];
  return Object.entries(profile.samples_per_s)
    .map(([key, rate]) => {
      const size = Number(key);
      return { size, rate, ratio: alone > 0 ? rate / alone : null, chosen: size === profile.best };
    })
    .sort((a, b) => a.size - b.size);
}

/** Rows per second: whole and grouped from 100 up, one decimal below. */
export function formatRate(rate: number): string {
  return rate >= 100 ? Math.round(rate).toLocaleString() : String(+rate.toFixed(1));
}

/** `1.72×`; `—` without a ratio. */
export function formatRatio(ratio: number | null): string {
  return ratio === null || !Number.isFinite(ratio) ? "—" : `${ratio.toFixed(2)}×`;
}

/** One sentence on the profile: what was measured and how later trials of the structure train, or that it was only asked for. */
export function fusionSummary(profile: FusionProfile): string {
  if (!isMeasured(profile)) {
    const within = profile.budget_s === undefined ? "" : `, within ${formatDuration(profile.budget_s)}`;
    return `Asked to measure fusion (up to ${profile.max_group} stacked copies${within}); no measurement stored.`;
  }
  const sizes = Object.keys(profile.samples_per_s);
  if (!sizes.length) return "Nothing measured before training: later trials of this structure train alone.";
  let verdict: string;
  if (profile.best !== 1) verdict = `train in groups of ${profile.best}`;
  else if (sizes.some((size) => size !== "1")) {
    verdict = `train alone: no group size beat training alone by ${Math.round((PAYS - 1) * 100)}%`;
  } else verdict = "train alone: no group size was measured besides training alone";
  const took = profile.seconds < 0.05 ? "under 0.1s" : formatDuration(profile.seconds);
  return `Measured in ${took} before training: later trials of this structure ${verdict}.`;
}
