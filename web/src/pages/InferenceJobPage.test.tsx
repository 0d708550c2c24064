import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";

import { apiError, mockApi } from "../test/api";
import { renderAt } from "../test/route";
import { InferenceJobPage, queriesBody } from "./InferenceJobPage";
import { rememberApiKey } from "./InferenceJobs";

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
      "GET /inference_jobs/3": [200, JOB],
      "GET /train_jobs/fraud/1": [200, { task: "TABULAR_CLASSIFICATION" }],
      "POST /inference_jobs/3/predict": [200, { predictions: ["cat", "dog"], members: { answered: [7], left_out: [] } }],
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
    expect(predictions).toHaveTextContent("answered by trials #7");
    const sent = calls.find((c) => c.method === "POST")!;
    expect(sent.headers["X-Api-Key"]).toBe("secret-key");
    expect(sent.body).toEqual({ queries: [[1, 2], [3, 4]] });
    expect(screen.getByTestId("endpoint")).toHaveTextContent("POST http://127.0.0.1:9999/predict");
  });

  it("shows a wrong key beside the key, and a bad query beside the queries", async () => {
    let answer = apiError(403, "wrong API key for this inference job (send it in the X-Api-Key header)", "api_key");
    mockApi({
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
