import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { describe, expect, it } from "vitest";

import { apiError, mockApi } from "../test/api";
import { InferenceJobs } from "./InferenceJobs";

const TRAIN_JOB = { id: 1, app: "fraud", app_version: 2, best_score: 0.9, trial_counts: { COMPLETED: 3, STOPPED: 0 } };

function renderPage() {
  render(
    <MemoryRouter initialEntries={["/inference"]}>
      <Routes>
        <Route path="/inference" element={<InferenceJobs />} />
        <Route path="/inference/:id" element={<p>job page</p>} />
      </Routes>
    </MemoryRouter>,
  );
}

describe("creating an inference job", () => {
  it("sends the request log rate, and shows the API's refusal of it beside the field", async () => {
    const calls = mockApi({
      "GET /inference_jobs": [200, { inference_jobs: [] }],
      "GET /train_jobs": [200, { train_jobs: [TRAIN_JOB] }],
      "GET /train_jobs/fraud/2/best_trials": [200, { trials: [] }],
      "POST /inference_jobs": (call) =>
        (call.body as { request_log_rate: number }).request_log_rate > 1
          ? apiError(400, "'request_log_rate' is 1.5; it must be between 0 and 1", "request_log_rate")
          : [201, { id: 9, api_key: "key" }],
    });
    renderPage();
    const form = await screen.findByRole("form", { name: "create an inference job" });
    const rate = within(form).getByLabelText("Request log rate");
    expect(rate).toHaveValue(0); // off by default
    const user = userEvent.setup();
    await user.clear(rate);
    await user.type(rate, "1.5");
    await user.click(within(form).getByRole("button", { name: "Create inference job" }));
    await waitFor(() => expect(rate).toHaveAccessibleDescription("'request_log_rate' is 1.5; it must be between 0 and 1"));
    expect(rate).toHaveAttribute("aria-invalid", "true");

    await user.clear(rate);
    await user.type(rate, "0.1");
    await user.click(within(form).getByRole("button", { name: "Create inference job" }));
    expect(await screen.findByText("job page")).toBeInTheDocument();
    expect(calls.filter((c) => c.method === "POST").map((c) => c.body)).toEqual([
      { app: "fraud", app_version: 2, public: false, request_log_rate: 1.5, k: 2 },
      { app: "fraud", app_version: 2, public: false, request_log_rate: 0.1, k: 2 },
    ]);
  });
});
