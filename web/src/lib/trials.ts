import { get } from "../api/client";
import type { TrialChanges, TrialPoint } from "../api/types";
import { isTrialOpen } from "../api/types";

/** The most ids one poll names as `open` (the API's limit). */
export const MAX_OPEN = 1000;

function same(a: TrialPoint, b: TrialPoint): boolean {
  return (
    a.status === b.status &&
    a.score === b.score &&
    a.started_at === b.started_at &&
    a.finished_at === b.finished_at &&
    a.worker === b.worker
  );
}

/**
 * Every trial of one job as the charts need it, kept up to date a poll at a time.
 *
 * A finished trial never changes, so a poll asks only for trials above the last id seen and
 * for those it last saw PENDING or RUNNING (GET .../trials/changes).
 */
export class TrialFeed {
  private readonly byId = new Map<number, TrialPoint>();
  private lastId = 0;
  /** Grows with every change, so that React can tell a new state from the same one. */
  revision = 0;

  /** Takes one answer in; true when anything changed. */
  merge(changes: TrialChanges): boolean {
    let changed = false;
    for (const trial of changes.trials) {
      const known = this.byId.get(trial.id);
      if (!known || !same(known, trial)) {
        this.byId.set(trial.id, trial);
        changed = true;
      }
    }
    this.lastId = Math.max(this.lastId, changes.last_id);
    if (changed) this.revision += 1;
    return changed;
  }

  openIds(): number[] {
    const open: number[] = [];
    for (const trial of this.byId.values()) if (isTrialOpen(trial.status)) open.push(trial.id);
    return open.sort((a, b) => a - b).slice(0, MAX_OPEN);
  }

  query(): string {
    const params = new URLSearchParams({ after_id: String(this.lastId) });
    const open = this.openIds();
    if (open.length) params.set("open", open.join(","));
    return params.toString();
  }

  points(): TrialPoint[] {
    return [...this.byId.values()].sort((a, b) => a.id - b.id);
  }

  get size(): number {
    return this.byId.size;
  }
}

/** Polls the job's changes into `feed` until the API has nothing more; true when anything changed. */
export async function pollChanges(app: string, version: number, feed: TrialFeed, signal?: AbortSignal): Promise<boolean> {
  const base = `/train_jobs/${encodeURIComponent(app)}/${version}/trials/changes`;
  let changed = false;
  for (;;) {
    const answer = await get<TrialChanges>(`${base}?${feed.query()}`, signal);
    changed = feed.merge(answer) || changed;
    if (!answer.more) return changed;
  }
}
