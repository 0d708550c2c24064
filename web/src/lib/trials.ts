import { get } from "../api/client";
import type { TrialChanges, TrialPoint, TrialSample, TrialStatus } from "../api/types";
import { isTrialOpen } from "../api/types";
import { PARALLEL_LINES, SCATTER_POINTS } from "./charts";

/** The most ids one poll names as `open` (the API's limit). */
export const MAX_OPEN = 1000;
/** The most trials one answer may hold (the API's limit): a job of 100,000 trials comes in one read. */
export const MAX_CHANGES = 100_000;

function same(a: TrialPoint, b: TrialPoint): boolean {
  return a.status === b.status && a.score === b.score && a.finished_ms === b.finished_ms;
}

/** The answer's arrays as points, read by the names in `fields`. */
export function toPoints(changes: { fields: string[]; trials: unknown[][] }): TrialPoint[] {
  const at = (name: string) => {
    const index = changes.fields.indexOf(name);
    if (index < 0) throw new Error(`trials/changes sent no field ${name}`);
    return index;
  };
  const [id, number, modelId, status, score, finished, knobs, policies] = [
    "id", "number", "model_id", "status", "score", "finished_at", "knobs", "policies",
  ].map(at);
  return changes.trials.map((row) => ({
    id: row[id] as number,
    number: row[number] as number,
    model_id: row[modelId] as number,
    status: row[status] as TrialStatus,
    score: row[score] as number | null,
    finished_ms: row[finished] === null ? null : Math.round((row[finished] as number) * 1000),
    knobs: row[knobs] as Record<string, unknown>,
    policies: row[policies] as Record<string, boolean>,
  }));
}

/**
 * The trials of one job as the charts need them, kept up to date a poll at a time.
 *
 * The first read is the server's sample (GET .../trials/sample): the trials the charts draw,
 * every open one, and how many scored trials per template it left out. A finished trial
 * never changes, so each poll then asks only for trials above the last id seen and for
 * those it last saw PENDING or RUNNING (GET .../trials/changes), and keeps all of them.
 */
export class TrialFeed {
  private readonly byId = new Map<number, TrialPoint>();
  private sorted: TrialPoint[] | null = [];
  private lastId = 0;
  private readonly left = new Map<number, number>();
  /** Whether the first read (the sample) is in. */
  sampled = false;
  /** Grows with every change, so that React can tell a new state from the same one. */
  revision = 0;

  /** Takes the sample in: its points, where the changes go on from, and what it left out. */
  mergeSample(sample: TrialSample): void {
    for (const [model, n] of Object.entries(sample.omitted)) this.left.set(Number(model), n);
    this.merge({ fields: sample.fields, trials: sample.trials, last_id: sample.last_id, more: false });
    this.sampled = true;
  }

  /** Per template id: its scored trials the feed does not hold (the sample left them out); they never change. */
  get omitted(): ReadonlyMap<number, number> {
    return this.left;
  }

  /** Takes one answer in; true when anything changed. */
  merge(changes: TrialChanges): boolean {
    let changed = false;
    for (const trial of toPoints(changes)) {
      const known = this.byId.get(trial.id);
      if (!known || !same(known, trial)) {
        this.byId.set(trial.id, trial);
        changed = true;
      }
    }
    this.lastId = Math.max(this.lastId, changes.last_id);
    if (changed) {
      this.revision += 1;
      this.sorted = null;
    }
    return changed;
  }

  openIds(): number[] {
    const open: number[] = [];
    for (const trial of this.byId.values()) if (isTrialOpen(trial.status)) open.push(trial.id);
    return open.sort((a, b) => a - b).slice(0, MAX_OPEN);
  }

  query(): string {
    const params = new URLSearchParams({ after_id: String(this.lastId), limit: String(MAX_CHANGES) });
    const open = this.openIds();
    if (open.length) params.set("open", open.join(","));
    return params.toString();
  }

  /** The points by id; the same array until something changes. */
  points(): TrialPoint[] {
    if (this.sorted === null) this.sorted = [...this.byId.values()].sort((a, b) => a.id - b.id);
    return this.sorted;
  }

  get size(): number {
    return this.byId.size;
  }
}

/** The first read of a job's trials into `feed`: the server's sample of them (see TrialFeed), for the charts' limits. */
export async function loadSample(app: string, version: number, feed: TrialFeed, signal?: AbortSignal): Promise<void> {
  const query = new URLSearchParams({ points: String(SCATTER_POINTS), lines: String(PARALLEL_LINES) });
  const base = `/train_jobs/${encodeURIComponent(app)}/${version}/trials/sample`;
  feed.mergeSample(await get<TrialSample>(`${base}?${query}`, signal));
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
