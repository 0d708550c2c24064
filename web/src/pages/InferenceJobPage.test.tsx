import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";

import type { Built } from "../lib/charts";
import { apiError, mockApi } from "../test/api";
import { renderAt } from "../test/route";
import { InferenceJobPage, queriesBody } from "./InferenceJobPage";
import { rememberApiKey } from "./InferenceJobs";

// jsdom has no canvas: the charts show what they were given instead of drawing it.
vi.mock("../components/Chart", () => ({
  Chart: ({ title, built, testId }: { title: string; built: Built; testId: string }) => (
    <div data-testid={testId} data-shown={built.shown} data-total={built.total}>
      {title}
    </div>
  ),
}));

const JOB = {
  id: 3,
  app: "fraud",
  app_version: 1,
  train_job_id: 1,
  status: "RUNNING",
  public: false,
  predictor_url: "http://127.0.0.1:9999",
  error: null,
  owner_id: 1,
  created_at: "2030-01-01T00:00:00+00:00",
  stopped_at: null,
  members: [{ trial_id: 7, model_name: "forest", score: 0.9 }],
  request_log_rate: 0,
};

const NO_STATS = { interval_s: 10, window_s: 3600, points: [] };
const V1 = { name: "v1", weight: 1, share: 1, trial_ids: [7], members: JOB.members };
const VERSIONS = {
  inference_job_id: 3, status: "RUNNING", revision: 1, versions: [V1], rollback_to: null, error: null,
  served_revision: 1, served_versions: [V1], converged: true,
};
/** What the page asks besides the job and the playground, with nothing in it. */
const QUIET: Record<string, [number, unknown]> = {
  "GET /inference_jobs/3/stats": [200, NO_STATS],
  "GET /inference_jobs/3/request_logs": [200, { request_logs: [] }],
  "GET /inference_jobs/3/versions": [200, VERSIONS],
};

function renderPage() {
  renderAt("/inference/3", "/inference/:id", <InferenceJobPage />);
}

describe("queriesBody", () => {
  it("takes a list of queries or an object holding them", () => {
    expect(queriesBody("[[1, 2]]")).toEqual({ queries: [[1, 2]] });
    expect(queriesBody('{"queries": [{"a": 1}]}')).toEqual({ queries: [{ a: 1 }] });
    expect(() => queriesBody('{"rows": []}')).toThrow(/type a list of queries/);
    expect(() => queriesBody("[1,")).toThrow(/not valid JSON/);
  });
});

describe("the playground", () => {
  it("sends typed queries with the remembered API key through the API and shows the predictions", async () => {
    const calls = mockApi({
      ...QUIET,
      "GET /inference_jobs/3": [200, JOB],
      "GET /train_jobs/fraud/1": [200, { task: "TABULAR_CLASSIFICATION" }],
      "POST /inference_jobs/3/predict": [200, { predictions: ["cat", "dog"], version: "v1", members: { answered: [7], left_out: [] } }],
    });
    rememberApiKey(3, "secret-key");
    renderPage();
    const playground = await screen.findByRole("region", { name: "playground" });
    expect(within(playground).getByLabelText("API key")).toHaveValue("secret-key");
    expect(within(playground).queryByRole("tab", { name: "Image" })).not.toBeInTheDocument();
    const user = userEvent.setup();
    await user.click(within(playground).getByLabelText("Queries (JSON)"));
    await user.paste("[[1, 2], [3, 4]]"); // typed, "[" would be a key name
    await user.click(within(playground).getByRole("button", { name: "Predict" }));

    const predictions = await within(playground).findByLabelText("predictions");
    expect(within(predictions).getAllByRole("row").map((row) => row.textContent)).toEqual(["QueryPrediction", '0"cat"', '1"dog"']);
    expect(predictions).toHaveTextContent("version v1: answered by trials #7");
    const versions = screen.getByRole("region", { name: "versions" });
    expect(within(versions).getByTestId("versions-served")).toHaveTextContent("The predictor serves revision 1, as wanted.");
    const sent = calls.find((c) => c.method === "POST")!;
    expect(sent.headers["X-Api-Key"]).toBe("secret-key");
    expect(sent.body).toEqual({ queries: [[1, 2], [3, 4]] });
    expect(screen.getByTestId("endpoint")).toHaveTextContent("POST http://127.0.0.1:9999/predict");
  });

  it("shows a wrong key beside the key, and a bad query beside the queries", async () => {
    let answer = apiError(403, "wrong API key for this inference job (send it in the X-Api-Key header)", "api_key");
    mockApi({
      ...QUIET,
      "GET /inference_jobs/3": [200, JOB],
      "GET /train_jobs/fraud/1": [200, { task: "TABULAR_CLASSIFICATION" }],
      "POST /inference_jobs/3/predict": () => answer,
    });
    renderPage();
    const playground = await screen.findByRole("region", { name: "playground" });
    const user = userEvent.setup();
    await user.type(within(playground).getByLabelText("API key"), "nope");
    await user.click(within(playground).getByLabelText("Queries (JSON)"));
    await user.paste("[[1]]");
    await user.click(within(playground).getByRole("button", { name: "Predict" }));
    await waitFor(() => expect(within(playground).getByLabelText("API key")).toHaveAccessibleDescription(/wrong API key/));

    answer = apiError(400, "queries[0]: expected a list of 2 numbers", "queries[0]");
    await user.click(within(playground).getByRole("button", { name: "Predict" }));
    await waitFor(() => expect(within(playground).getByLabelText("Queries (JSON)")).toHaveAccessibleDescription(/queries\[0\]: expected/));
    expect(within(playground).getByLabelText("API key")).toHaveAttribute("aria-invalid", "false");
  });

  it("offers an image upload for an image job", async () => {
    mockApi({
      ...QUIET,
      "GET /inference_jobs/3": [200, { ...JOB, public: true }],
      "GET /train_jobs/fraud/1": [200, { task: "IMAGE_CLASSIFICATION" }],
    });
    renderPage();
    const playground = await screen.findByRole("region", { name: "playground" });
    expect(within(playground).getByRole("tab", { name: "Image" })).toHaveAttribute("aria-selected", "true");
    expect(within(playground).getByLabelText("Images")).toHaveAttribute("type", "file");
    expect(within(playground).queryByLabelText("API key")).not.toBeInTheDocument();
  });
});

describe("serving and request logs", () => {
  const point = (second: number, requests: number, p50: number | null, p99: number | null, batch: number | null) => ({
    time: `2030-01-01T00:00:${String(second).padStart(2, "0")}+00:00`,
    requests,
    requests_per_s: requests / 10,
    p50_ms: p50,
    p99_ms: p99,
    batch_size: batch,
  });

  it("charts the predictor's stats and lists the logged days, each a download", async () => {
    const stats = { interval_s: 10, window_s: 3600, points: [point(10, 20, 3.5, 9.1, 2.5), point(20, 0, null, null, null), point(30, 4, 2, 4, 1)] };
    const days = [
      { day: "2030-01-02", name: "inference-3-2030-01-02.jsonl", size_bytes: 2048 },
      { day: "2030-01-01", name: "inference-3-2030-01-01.jsonl", size_bytes: 100 },
    ];
    const calls = mockApi({
      "GET /inference_jobs/3": [200, { ...JOB, request_log_rate: 0.25 }],
      "GET /train_jobs/fraud/1": [200, { task: "TABULAR_CLASSIFICATION" }],
      "GET /inference_jobs/3/stats": [200, stats],
      "GET /inference_jobs/3/request_logs": [200, { request_logs: days }],
      "GET /inference_jobs/3/request_logs/2030-01-01": [200, { time: "2030-01-01T00:00:00+00:00" }],
    });
    renderPage();
    const serving = await screen.findByRole("region", { name: "serving" });
    // Every point has a rate; the idle one has no latency and no batch size: gaps, not zeros.
    await waitFor(() => expect(within(serving).getByTestId("chart-requests")).toHaveAttribute("data-shown", "3"));
    expect(within(serving).getByTestId("chart-latency")).toHaveAttribute("data-shown", "4");
    expect(within(serving).getByTestId("chart-batch-size")).toHaveAttribute("data-shown", "2");

    const logs = screen.getByRole("region", { name: "request logs" });
    expect(within(logs).getByTestId("request-log-rate")).toHaveTextContent("logs 25% of the requests");
    const table = await within(logs).findByRole("table", { name: "request log days" });
    expect(within(table).getAllByRole("row").slice(1).map((row) => row.textContent)).toEqual([
      "2030-01-022.0 KiBDownload inference-3-2030-01-02.jsonl",
      "2030-01-01100 BDownload inference-3-2030-01-01.jsonl",
    ]);
    const saved: string[] = [];
    vi.stubGlobal(
      "URL",
      class extends URL {
        static createObjectURL = () => "blob:log";
        static revokeObjectURL = () => undefined;
      },
    );
    vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(function (this: HTMLAnchorElement) {
      saved.push(this.download);
    });
    await userEvent.setup().click(within(table).getByRole("button", { name: "Download inference-3-2030-01-01.jsonl" }));
    await waitFor(() => expect(saved).toEqual(["inference-3-2030-01-01.jsonl"]));
    expect(calls.filter((c) => c.path.startsWith("/inference_jobs/3/request_logs/")).map((c) => c.path)).toEqual([
      "/inference_jobs/3/request_logs/2030-01-01",
    ]);
  });

  it("shows why the stats cannot be read, and no chart for a job that is not running", async () => {
    mockApi({
      ...QUIET,
      "GET /inference_jobs/3": [200, JOB],
      "GET /train_jobs/fraud/1": [200, { task: "TABULAR_CLASSIFICATION" }],
      "GET /inference_jobs/3/stats": apiError(502, "the predictor of inference job 3 does not answer (ConnectionError)"),
    });
    renderPage();
    const serving = await screen.findByRole("region", { name: "serving" });
    await within(serving).findByText(/the predictor of inference job 3 does not answer/);
    expect(within(serving).getByTestId("chart-requests")).toHaveAttribute("data-shown", "0");
    expect(screen.getByTestId("request-log-rate")).toHaveTextContent("logs no requests");
  });

  it("asks no stats of a stopped job", async () => {
    const calls = mockApi({ ...QUIET, "GET /inference_jobs/3": [200, { ...JOB, status: "STOPPED", predictor_url: null }] });
    renderPage();
    const serving = await screen.findByRole("region", { name: "serving" });
    expect(serving).toHaveTextContent("The charts show while the job is RUNNING");
    expect(within(serving).queryByTestId("chart-requests")).not.toBeInTheDocument();
    await screen.findByTestId("request-log-rate");
    expect(calls.some((c) => c.path.endsWith("/stats"))).toBe(false);
  });
});
