import type { TrialChanges, TrialPoint, TrialSample } from "../api/types";

const FIELDS = ["id", "number", "model_id", "status", "score", "finished_at", "knobs", "policies"];

/** An answer of GET .../trials/changes holding `points`, as the API sends it (arrays, seconds). */
export function changesOf(points: TrialPoint[], last_id: number, more = false): TrialChanges {
  const trials = points.map((p) => [
    p.id, p.number, p.model_id, p.status, p.score, p.finished_ms === null ? null : p.finished_ms / 1000, p.knobs, p.policies,
  ]);
  return { fields: FIELDS, trials, last_id, more };
}

/** An answer of GET .../trials/sample holding `points`, with `omitted` scored trials left out per template id. */
export function sampleOf(points: TrialPoint[], last_id: number, omitted: Record<string, number> = {}): TrialSample {
  const { fields, trials } = changesOf(points, last_id);
  return { fields, trials, last_id, omitted };
}
