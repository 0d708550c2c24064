import { describe, expect, it } from "vitest";

import type { TrialPoint } from "../api/types";
import { mockApi } from "../test/api";
import { changesOf, sampleOf } from "../test/changes";
import { TrialFeed, loadSample, pollChanges } from "./trials";

function point(id: number, status: TrialPoint["status"], score: number | null = null): TrialPoint {
  return { id, number: id, model_id: 1, status, score, finished_ms: score === null ? null : 1_900_000_000_123, knobs: {}, policies: {} };
}

describe("TrialFeed", () => {
  it("asks for trials above the last id and for those it saw open", () => {
    const feed = new TrialFeed();
    expect(feed.query()).toBe("after_id=0&limit=100000");
    expect(feed.merge(changesOf([point(1, "COMPLETED", 0.5), point(2, "RUNNING"), point(3, "PENDING")], 3, false))).toBe(true);
    expect(feed.openIds()).toEqual([2, 3]);
    expect(feed.query()).toBe("after_id=3&limit=100000&open=2%2C3");

    // Trial 2 finished, trial 4 is new; trial 3 is unchanged.
    expect(feed.merge(changesOf([point(2, "COMPLETED", 0.9), point(3, "PENDING"), point(4, "RUNNING")], 4, false))).toBe(true);
    expect(feed.points().map((p) => [p.id, p.status])).toEqual([
      [1, "COMPLETED"],
      [2, "COMPLETED"],
      [3, "PENDING"],
      [4, "RUNNING"],
    ]);
    expect(feed.query()).toBe("after_id=4&limit=100000&open=3%2C4");
  });

  it("reads the arrays by the names the answer gives, times in seconds", () => {
    const feed = new TrialFeed();
    feed.merge({
      fields: ["score", "id", "number", "model_id", "status", "finished_at", "knobs", "policies"],
      trials: [[0.75, 7, 3, 2, "COMPLETED", 1_900_000_000.123, { lr: 0.1 }, { EARLY_STOP: true }]],
      last_id: 7,
      more: false,
    });
    expect(feed.points()).toEqual([
      { id: 7, number: 3, model_id: 2, status: "COMPLETED", score: 0.75, finished_ms: 1_900_000_000_123, knobs: { lr: 0.1 }, policies: { EARLY_STOP: true } },
    ]);
    expect(() => feed.merge({ fields: ["id"], trials: [], last_id: 7, more: false })).toThrow(/no field number/);
  });

  it("keeps the same array of points until something changes, so that the charts are not built again", () => {
    const feed = new TrialFeed();
    feed.merge(changesOf([point(2, "RUNNING"), point(1, "COMPLETED", 0.5)], 2));
    const first = feed.points();
    expect(first.map((p) => p.id)).toEqual([1, 2]);
    feed.merge(changesOf([point(2, "RUNNING")], 2));
    expect(feed.points()).toBe(first);
    feed.merge(changesOf([point(2, "COMPLETED", 0.7)], 2));
    expect(feed.points()).not.toBe(first);
    expect(feed.points()[1].score).toBe(0.7);
  });

  it("tells an unchanged answer apart, so that nothing is drawn again", () => {
    const feed = new TrialFeed();
    feed.merge(changesOf([point(1, "RUNNING")], 1, false));
    const revision = feed.revision;
    expect(feed.merge(changesOf([point(1, "RUNNING")], 1, false))).toBe(false);
    expect(feed.revision).toBe(revision);
  });
});

describe("pollChanges", () => {
  it("follows `more` until the API has sent everything", async () => {
    const calls = mockApi({
      "GET /train_jobs/my%20app/2/trials/changes?after_id=0&limit=100000": [200, changesOf([point(1, "COMPLETED", 1)], 1, true)],
      "GET /train_jobs/my%20app/2/trials/changes?after_id=1&limit=100000": [200, changesOf([point(2, "RUNNING")], 2, false)],
    });
    const feed = new TrialFeed();
    expect(await pollChanges("my app", 2, feed)).toBe(true);
    expect(calls.map((c) => c.path)).toEqual([
      "/train_jobs/my%20app/2/trials/changes?after_id=0&limit=100000",
      "/train_jobs/my%20app/2/trials/changes?after_id=1&limit=100000",
    ]);
    expect(feed.size).toBe(2);
  });
});

describe("loadSample", () => {
  it("reads the server's sample at the charts' limits, then the changes go on from its last id and its open trials", async () => {
    const calls = mockApi({
      "GET /train_jobs/my%20app/2/trials/sample?points=2000&lines=600": [
        200,
        sampleOf([point(3, "COMPLETED", 0.9), point(7, "RUNNING")], 9, { 1: 120, 4: 3 }),
      ],
    });
    const feed = new TrialFeed();
    expect(feed.sampled).toBe(false);
    await loadSample("my app", 2, feed);
    expect(calls.map((c) => c.path)).toEqual(["/train_jobs/my%20app/2/trials/sample?points=2000&lines=600"]);
    expect(feed.sampled).toBe(true);
    expect(feed.points().map((p) => p.id)).toEqual([3, 7]);
    expect(feed.revision).toBe(1);
    expect([...feed.omitted]).toEqual([
      [1, 120],
      [4, 3],
    ]);
    expect(feed.query()).toBe("after_id=9&limit=100000&open=7");

    // What the changes send is kept whole; what the sample left out stays counted.
    feed.merge(changesOf([point(7, "COMPLETED", 0.5), point(10, "RUNNING")], 10));
    expect(feed.points().map((p) => p.id)).toEqual([3, 7, 10]);
    expect(feed.omitted.get(1)).toBe(120);
  });
});
