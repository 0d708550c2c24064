import { render, screen } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { describe, expect, it, vi } from "vitest";

import type { Trial } from "../api/types";
import { mockApi, signInAs } from "../test/api";
import { TrialPage } from "./TrialPage";

// jsdom has no canvas.
vi.mock("../components/Chart", () => ({ Chart: ({ title }: { title: string }) => <div>{title}</div> }));

function trial(overrides: Partial<Trial>): Trial {
  return {
    id: 7,
    train_job_id: 1,
    sub_job_id: 1,
    model_id: 5,
    model_name: "cnn",
    number: 3,
    knobs: { width: 32 },
    policies: {},
    status: "COMPLETED",
    score: 0.91,
    created_at: "2030-01-01T00:00:00+00:00",
    started_at: "2030-01-01T00:00:00+00:00",
    finished_at: "2030-01-01T00:01:00+00:00",
    duration_s: 60,
    worker: "w0@host:12",
    attempts: 1,
    error: null,
    has_params: true,
    parent_zoo_model_id: null,
    similarity: null,
    ...overrides,
  };
}

function renderTrial(shown: Trial) {
  mockApi({
    "GET /trials/7": [200, shown],
    "GET /trials/7/metrics": [200, { metrics: [] }],
    "GET /trials/7/logs": [200, { logs: [] }],
  });
  signInAs({ id: 1, email: "dev@example.com", role: "MODEL_DEVELOPER" });
  render(
    <MemoryRouter initialEntries={["/jobs/cifar/1/trials/7"]}>
      <Routes>
        <Route path="/jobs/:app/:version/trials/:trialId" element={<TrialPage />} />
      </Routes>
    </MemoryRouter>,
  );
}

describe("TrialPage", () => {
  it("shows the zoo model a warm-started trial came from, and how alike they are", async () => {
    renderTrial(trial({ parent_zoo_model_id: 12, similarity: 0.8347 }));
    expect(await screen.findByTestId("warm-start")).toHaveTextContent("zoo model #12, similarity 0.83");
  });

  it("says a trial trained from scratch had no warm start", async () => {
    renderTrial(trial({}));
    expect(await screen.findByTestId("warm-start")).toHaveTextContent("none");
  });
});
