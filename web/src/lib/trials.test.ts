import { describe, expect, it } from "vitest";

import type { TrialPoint } from "../api/types";
import { mockApi } from "../test/api";
import { TrialFeed, pollChanges } from "./trials";

function point(id: number, status: TrialPoint["status"], score: number | null = null): TrialPoint {
  return { id, number: id, model_id: 1, status, score, started_at: null, finished_at: null, knobs: {}, policies: {}, worker: null };
}

describe("TrialFeed", () => {
  it("asks for trials above the last id and for those it saw open", () => {
    const feed = new TrialFeed();
    expect(feed.query()).toBe("after_id=0");
    expect(feed.merge({ trials: [point(1, "COMPLETED", 0.5), point(2, "RUNNING"), point(3, "PENDING")], last_id: 3, more: false })).toBe(true);
    expect(feed.openIds()).toEqual([2, 3]);
    expect(feed.query()).toBe("after_id=3&open=2%2C3");

    // Trial 2 finished, trial 4 is new; trial 3 is unchanged.
    expect(feed.merge({ trials: [point(2, "COMPLETED", 0.9), point(3, "PENDING"), point(4, "RUNNING")], last_id: 4, more: false })).toBe(true);
    expect(feed.points().map((p) => [p.id, p.status])).toEqual([
      [1, "COMPLETED"],
      [2, "COMPLETED"],
      [3, "PENDING"],
      [4, "RUNNING"],
    ]);
    expect(feed.query()).toBe("after_id=4&open=3%2C4");
  });

  it("tells an unchanged answer apart, so that nothing is drawn again", () => {
    const feed = new TrialFeed();
    feed.merge({ trials: [point(1, "RUNNING")], last_id: 1, more: false });
    const revision = feed.revision;
    expect(feed.merge({ trials: [point(1, "RUNNING")], last_id: 1, more: false })).toBe(false);
    expect(feed.revision).toBe(revision);
  });
});

describe("pollChanges", () => {
  it("follows `more` until the API has sent everything", async () => {
    const calls = mockApi({
      "GET /train_jobs/my%20app/2/trials/changes?after_id=0": [200, { trials: [point(1, "COMPLETED", 1)], last_id: 1, more: true }],
      "GET /train_jobs/my%20app/2/trials/changes?after_id=1": [200, { trials: [point(2, "RUNNING")], last_id: 2, more: false }],
    });
    const feed = new TrialFeed();
    expect(await pollChanges("my app", 2, feed)).toBe(true);
    expect(calls.map((c) => c.path)).toEqual([
      "/train_jobs/my%20app/2/trials/changes?after_id=0",
      "/train_jobs/my%20app/2/trials/changes?after_id=1",
    ]);
    expect(feed.size).toBe(2);
  });
});
