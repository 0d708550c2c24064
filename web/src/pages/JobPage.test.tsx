import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";

import type { TrialPoint, TrialStatus } from "../api/types";
import type { Built } from "../lib/charts";
import { mockApi } from "../test/api";
import { changesOf, sampleOf } from "../test/changes";
import { renderAt } from "../test/route";
import { JobPage } from "./JobPage";

// jsdom has no canvas: the charts show what they were given instead of drawing it.
vi.mock("../components/Chart", () => ({
  Chart: ({ title, built, testId }: { title: string; built: Built; testId: string }) => (
    <div data-testid={testId} data-shown={built.shown} data-total={built.total}>
      {title}
    </div>
  ),
}));

/** The page of job fraud v2, as the router shows it. */
function renderJobPage() {
  renderAt("/jobs/fraud/2", "/jobs/:app/:version", <JobPage />);
}

function job(status: string, trials: number, placement: unknown = null) {
  return {
    id: 1,
    app: "fraud",
    app_version: 2,
    task: "TABULAR_CLASSIFICATION",
    status,
    error: null,
    train_dataset_id: 1,
    val_dataset_id: 2,
    budget: { GPU_COUNT: 0, TIME_HOURS: 0.5, MODEL_TRIAL_COUNT: 10 },
    train_args: {},
    options: {},
    target: "label",
    seed: 42,
    owner_id: 1,
    created_at: "2030-01-01T00:00:00+00:00",
    started_at: "2030-01-01T00:00:00+00:00",
    finished_at: null,
    trial_counts: { PENDING: 0, RUNNING: 1, COMPLETED: trials - 1, ERRORED: 0, STOPPED: 0, CANCELLED: 0, INVALID: 0 },
    best_score: 0.8,
    budget_used: { time_s: 600, time_limit_s: 1800, trials, trial_limit: 10 },
    placement,
    sub_jobs: [{ id: 1, model_id: 5, model_name: "forest", strategy: "tpe", status, error: null, trial_counts: {} }],
  };
}

function point(id: number, status: TrialStatus, score: number | null): TrialPoint {
  return {
    id,
    number: id - 1,
    model_id: 5,
    status,
    score,
    finished_ms: score === null ? null : Date.parse(`2030-01-01T00:0${id}:00+00:00`),
    knobs: { depth: id },
    policies: {},
  };
}

describe("JobPage", () => {
  it("shows the budget used, draws the server's sample of the trials, then polls only what changed until the job ends", async () => {
    let polls = 0;
    const calls = mockApi({
      "GET /train_jobs/fraud/2": () => [200, polls === 0 ? job("RUNNING", 3) : job("COMPLETED", 3)],
      // The sample left out 40 scored trials of template 5; trial 2 runs.
      "GET /train_jobs/fraud/2/trials/sample": [200, sampleOf([point(1, "COMPLETED", 0.8), point(2, "RUNNING", null)], 2, { 5: 40 })],
      "GET /train_jobs/fraud/2/trials/changes": () => {
        polls += 1;
        return [200, changesOf([point(2, "COMPLETED", 0.9)], 2, false)];
      },
      "GET /train_jobs/fraud/2/trials": [200, { trials: [], total: 0, page: 1, per_page: 25 }],
      "GET /models/5": [200, { knob_config: { depth: { type: "IntegerKnob", value_min: 1, value_max: 9, is_exp: false } } }],
      "GET /trials/1/metrics": [200, { metrics: [{ step: 0, time: "", metrics: { acc: 0.5 } }] }],
      "GET /trials/2/metrics": [200, { metrics: [{ step: 0, time: "", metrics: { acc: 0.6 } }] }],
    });
    renderJobPage();

    expect(await screen.findByRole("progressbar", { name: "Time" })).toHaveAttribute("aria-valuenow", "33");
    expect(screen.getByRole("progressbar", { name: "Trials" })).toHaveAttribute("aria-valuetext", "3 of 10");
    await waitFor(() => expect(screen.getByTestId("chart-scores")).toHaveAttribute("data-shown", "1"));
    // The charts say of how many trials they show a part.
    expect(screen.getByTestId("chart-scores")).toHaveAttribute("data-total", "41");
    expect(screen.getByTestId("chart-parallel")).toHaveAttribute("data-total", "41");
    expect(calls.filter((c) => c.path.includes("/sample")).map((c) => c.path.split("?")[1])).toEqual(["points=2000&lines=600"]);
    // The table was read alongside the sample: not again for it.
    const tableReads = () => calls.filter((c) => c.path.startsWith("/train_jobs/fraud/2/trials?")).length;
    expect(tableReads()).toBe(1);
    expect(screen.getByRole("button", { name: "Stop job" })).toBeInTheDocument();
    expect(screen.getByText(/seed 42/)).toBeInTheDocument(); // shown, so that the job can be repeated
    expect(screen.getByText(/· target label/)).toBeInTheDocument(); // the column the job's templates predict
    await waitFor(() => expect(screen.getByTestId("chart-metrics")).toHaveAttribute("data-shown", "1"));

    // The next poll names the running trial and the last id, and the job ends.
    await waitFor(() => expect(screen.getByTestId("job-page")).toHaveAttribute("data-status", "COMPLETED"), { timeout: 4000 });
    const changes = calls.filter((c) => c.path.includes("/changes")).map((c) => c.path.split("?")[1]);
    // The first poll goes on from the sample's last id, naming its running trial; later ones have no open trial.
    expect(changes[0]).toBe("after_id=2&limit=100000&open=2");
    expect(new Set(changes.slice(1))).toEqual(new Set(changes.length > 1 ? ["after_id=2&limit=100000"] : []));
    expect(screen.getByTestId("chart-scores")).toHaveAttribute("data-shown", "2");
    expect(screen.getByTestId("chart-scores")).toHaveAttribute("data-total", "42");
    // Trial 2 finished: the table is read again.
    await waitFor(() => expect(tableReads()).toBe(2));
    expect(screen.getByTestId("chart-best")).toHaveAttribute("data-shown", "2");
    expect(screen.queryByRole("button", { name: "Stop job" })).not.toBeInTheDocument();
    // The best trials changed: the metric curves ask for the new one's metrics (after the render).
    await waitFor(() => expect(calls.some((c) => c.path === "/trials/2/metrics")).toBe(true));
  });
});

/** The job page of a finished job with no trials, the API answering `shown` for the job. */
async function showFinished(shown: unknown) {
  mockApi({
    "GET /train_jobs/fraud/2": [200, shown],
    "GET /train_jobs/fraud/2/trials/sample": [200, sampleOf([], 0)],
    "GET /train_jobs/fraud/2/trials": [200, { trials: [], total: 0, page: 1, per_page: 25 }],
    "GET /models/5": [200, { knob_config: {} }],
  });
  renderJobPage();
  await screen.findByRole("progressbar", { name: "Time" });
}

describe("the placement card", () => {
  it("is shown only under the planner: its method, its fallback, its predictions against the finish", async () => {
    const planned = {
      method: "search",
      fallback: "no completed trial of forest (sub-job 1) yet: the fixed rules place the trials",
      predictions: [
        ["2030-01-01T00:01:00+00:00", "2030-01-01T00:10:00+00:00", 0.9],
        ["2030-01-01T00:02:00+00:00", "2030-01-01T00:09:00+00:00", 0.95],
      ],
    };
    await showFinished({ ...job("COMPLETED", 3, planned), finished_at: "2030-01-01T00:09:30+00:00" });
    const summary = screen.getByTestId("placement-summary");
    expect(summary).toHaveTextContent("Planned by search");
    expect(summary).toHaveTextContent("slots 95% busy");
    expect(summary).toHaveTextContent("it ended 30s after the last prediction");
    expect(screen.getByTestId("placement-fallback")).toHaveTextContent("the fixed rules place the trials");
    expect(screen.getByTestId("placement-chart")).toHaveAttribute("data-shown", "2");
  });

  it("is absent under the fixed rules", async () => {
    await showFinished(job("COMPLETED", 3));
    expect(screen.queryByRole("region", { name: "placement" })).not.toBeInTheDocument();
  });
});

describe("the ENAS finalists card", () => {
  it("lists an ENAS sub-job's finalists and charts the one trained alone", async () => {
    const base = job("COMPLETED", 3);
    const enas = { ...base, sub_jobs: [
      {
        ...base.sub_jobs[0],
        strategy: "enas",
        final_ranking: [
          { trial_id: 21, knobs: { arch: [1] }, shared_score: 0.61, standalone_trial_id: 24, standalone_score: 0.83 },
          { trial_id: 22, knobs: { arch: [2] }, shared_score: 0.58, standalone_trial_id: null, standalone_score: null },
        ],
      },
    ] };
    await showFinished({ ...enas, finished_at: "2030-01-01T00:09:30+00:00" });
    const rows = screen.getByTestId("enas-ranking").querySelectorAll("tbody tr");
    expect([...rows].map((row) => row.textContent)).toEqual(["210.61000.8300 (trial 24)", "220.5800—"]);
    expect(screen.getByTestId("enas-ranking-chart")).toHaveAttribute("data-shown", "1");
  });

  it("is absent without an ENAS sub-job", async () => {
    await showFinished(job("COMPLETED", 3));
    expect(screen.queryByTestId("enas-ranking")).not.toBeInTheDocument();
  });
});

describe("stopping a job", () => {
  it("asks first, then shows the job as the API answers it", async () => {
    const calls = mockApi({
      "GET /train_jobs/fraud/2": [200, job("RUNNING", 1)],
      "GET /train_jobs/fraud/2/trials/sample": [200, sampleOf([point(1, "RUNNING", null)], 1)],
      "GET /train_jobs/fraud/2/trials/changes": [200, changesOf([point(1, "RUNNING", null)], 1, false)],
      "GET /train_jobs/fraud/2/trials": [200, { trials: [], total: 0, page: 1, per_page: 25 }],
      "GET /models/5": [200, { knob_config: {} }],
      "POST /train_jobs/fraud/2/stop": [200, job("STOPPING", 1)],
    });
    const confirm = vi.spyOn(window, "confirm").mockReturnValueOnce(false).mockReturnValueOnce(true);
    renderJobPage();
    const user = userEvent.setup();
    await user.click(await screen.findByRole("button", { name: "Stop job" }));
    expect(calls.some((c) => c.method === "POST")).toBe(false);
    await user.click(screen.getByRole("button", { name: "Stop job" }));
    expect(confirm).toHaveBeenCalledTimes(2);
    expect(calls.filter((c) => c.method === "POST").map((c) => c.path)).toEqual(["/train_jobs/fraud/2/stop"]);
    expect(await screen.findByTestId("job-page")).toHaveAttribute("data-status", "STOPPING");
    expect(screen.queryByRole("button", { name: "Stop job" })).not.toBeInTheDocument();
  });
});
