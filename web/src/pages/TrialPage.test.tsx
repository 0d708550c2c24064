import { screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";

import type { Architecture, Trial } from "../api/types";
import { mockApi, signInAs } from "../test/api";
import { renderAt } from "../test/route";
import { TrialPage } from "./TrialPage";

// jsdom has no canvas.
vi.mock("../components/Chart", () => ({
  Chart: ({ title, controls }: { title: string; controls?: React.ReactNode }) => (
    <div>
      {title}
      {controls}
    </div>
  ),
}));

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
    fused_group: null,
    fusion_profile: null,
    ...overrides,
  };
}

function renderTrial(shown: Trial, architecture?: Architecture) {
  const routes: Parameters<typeof mockApi>[0] = {
    "GET /trials/7": [200, shown],
    "GET /trials/7/metrics": [200, { metrics: [] }],
    "GET /trials/7/logs": [200, { logs: [] }],
  };
  if (architecture) routes["GET /trials/7/architecture"] = [200, architecture];
  const calls = mockApi(routes);
  signInAs({ id: 1, email: "dev@example.com", role: "MODEL_DEVELOPER" });
  renderAt("/jobs/cifar/1/trials/7", "/jobs/:app/:version/trials/:trialId", <TrialPage />);
  return calls;
}

describe("TrialPage", () => {
  it("shows the zoo model a warm-started trial came from, and how alike they are", async () => {
    renderTrial(trial({ parent_zoo_model_id: 12, similarity: 0.8347 }));
    expect(await screen.findByTestId("warm-start")).toHaveTextContent("zoo model #12, similarity 0.83");
  });

  it("shows a fused trial's group with links to its group-mates", async () => {
    const members = [{ id: 6, number: 2 }, { id: 7, number: 3 }, { id: 8, number: 4 }];
    renderTrial(trial({ fused_group: { id: 6, size: 3, members } }));
    expect(await screen.findByRole("link", { name: "fused ×3" })).toHaveAttribute("href", "/jobs/cifar/1/trials/6");
    const mates = screen.getByTestId("fused-with");
    expect(within(mates).getAllByRole("link").map((link) => [link.textContent, link.getAttribute("href")])).toEqual([
      ["#2", "/jobs/cifar/1/trials/6"],
      ["#4", "/jobs/cifar/1/trials/8"],
    ]);
  });

  it("shows no group for a trial run alone", async () => {
    renderTrial(trial({}));
    await screen.findByTestId("warm-start");
    expect(screen.queryByText(/fused/)).not.toBeInTheDocument();
    expect(screen.queryByTestId("fused-with")).not.toBeInTheDocument();
  });

  it("says a trial trained from scratch had no warm start", async () => {
    renderTrial(trial({}));
    expect(await screen.findByTestId("warm-start")).toHaveTextContent("none");
  });

  it("shows an INVALID trial apart from an ERRORED one, with why its architecture cannot be built", async () => {
    const error = "train() raised InvalidArchitectureError: width 3 does not divide the 12 input features";
    renderTrial(trial({ status: "INVALID", score: null, has_params: false, error }));
    const section = await screen.findByRole("region", { name: "error" });
    expect(section).toHaveTextContent("Invalid architecture");
    expect(section).toHaveTextContent(error);
    const badge = screen.getByText("INVALID");
    expect(badge).toHaveClass("badge-invalid");
    expect(badge).toHaveAttribute("title", expect.stringContaining("invalid architecture"));
  });

  it("titles an ERRORED trial's section Error, with the error badge", async () => {
    renderTrial(trial({ status: "ERRORED", score: null, error: "train() raised ValueError: boom" }));
    const section = await screen.findByRole("region", { name: "error" });
    expect(section).toHaveTextContent("Error");
    expect(section).not.toHaveTextContent("Invalid architecture");
    expect(screen.getByText("ERRORED")).toHaveClass("badge-bad");
  });
});

describe("TrialPage lineage", () => {
  const ancestor = {
    via: "zoo" as const,
    source: "trial" as const,
    trial_id: 4,
    number: 2,
    train_job_id: 1,
    app: "cifar",
    app_version: 1,
    zoo_model_id: 12,
    similarity: 0.9,
    epochs: 3,
    phase: null,
    merged_onto: null,
  };

  it("says a final retrain trained from scratch", async () => {
    renderTrial(
      trial({ phase: "final", lineage: { from: "scratch", chain: [], inherited_epochs: 0, truncated: false } }),
    );
    expect(await screen.findByTestId("final-retrain")).toHaveTextContent("trained from scratch.");
    expect(screen.getByTestId("lineage-summary")).toHaveTextContent("Trained from scratch.");
    expect(screen.queryByRole("list", { name: "ancestors" })).toBeNull();
  });

  it("shows a final retrain's chain: visible ancestors linked, hidden ones counted", async () => {
    renderTrial(
      trial({
        phase: "final",
        parent_zoo_model_id: 12,
        similarity: 0.9,
        lineage: {
          from: "zoo",
          chain: [
            ancestor,
            { hidden: true },
            {
              ...ancestor,
              source: "upload",
              trial_id: null,
              number: null,
              app: null,
              app_version: null,
              zoo_model_id: 30,
              epochs: null,
            },
          ],
          inherited_epochs: 8,
          truncated: false,
        },
      }),
    );
    expect(await screen.findByTestId("final-retrain")).toHaveTextContent(
      "trained from the chain below, not from scratch.",
    );
    expect(screen.getByTestId("lineage-summary")).toHaveTextContent(
      "Trained from a zoo model: 8 epochs inherited along a chain of 3 ancestors.",
    );
    const link = screen.getByRole("link", { name: "cifar v1 trial #2" });
    expect(link).toHaveAttribute("href", "/jobs/cifar/1/trials/4");
    const items = screen.getAllByRole("listitem").map((item) => item.textContent);
    expect(items).toEqual([
      "cifar v1 trial #2 via zoo model #12, similarity 0.90; 3 epochs",
      "a model you may not see (its epochs are counted)",
      "zoo model #30, similarity 0.90: uploaded outside a job, epochs unknown",
    ]);
  });

  it("marks a cut chain and says nothing of a final retrain for a search trial", async () => {
    renderTrial(
      trial({
        phase: "search",
        lineage: {
          from: "shared_params",
          chain: [{ ...ancestor, via: "shared_params", similarity: null }],
          inherited_epochs: 3,
          truncated: true,
        },
      }),
    );
    expect(await screen.findByTestId("lineage-summary")).toHaveTextContent(
      "Trained from shared parameters: 3 epochs inherited along a chain of 1+ ancestors.",
    );
    expect(screen.queryByTestId("final-retrain")).toBeNull();
    expect(screen.getByText("… and more (only the nearest are listed)")).toBeInTheDocument();
  });
});

describe("TrialPage lineage of shared trainings added up", () => {
  it("names the trial whose update the weights hold and the one whose weights it was added onto", async () => {
    const shared = {
      via: "shared_params" as const,
      source: "trial" as const,
      trial_id: 20,
      number: 3,
      train_job_id: 1,
      app: "enas",
      app_version: 1,
      zoo_model_id: null,
      similarity: null,
      epochs: 1,
      phase: "train_shared",
      merged_onto: null,
    };
    renderTrial(
      trial({
        phase: "evaluate",
        lineage: {
          from: "shared_params",
          chain: [
            { ...shared, source: "merged", trial_id: 22, number: 5, merged_onto: { trial_id: 21, number: 4 } },
            shared,
          ],
          inherited_epochs: 2,
          truncated: false,
        },
      }),
    );
    expect(await screen.findByTestId("lineage-summary")).toHaveTextContent(
      "Trained from shared parameters: 2 epochs inherited along a chain of 2 ancestors.",
    );
    const items = screen.getAllByRole("listitem").map((item) => item.textContent);
    expect(items).toEqual([
      "shared parameters: the update of enas v1 trial #5 (train_shared phase), 1 epoch, added onto the shared " +
        "weights trial #4 left; it had trained from the next ancestor",
      "enas v1 trial #3 via shared parameters; 1 epoch (train_shared phase)",
    ]);
    expect(screen.getByRole("link", { name: "trial #4" })).toHaveAttribute("href", "/jobs/enas/1/trials/21");
    expect(screen.getByRole("link", { name: "enas v1 trial #5" })).toHaveAttribute("href", "/jobs/enas/1/trials/22");
  });
});

describe("TrialPage architecture", () => {
  const node = (name: string, inputs: string[], mutator: string | null = null) => ({
    name,
    op: "call_module",
    what: "Linear",
    inputs,
    changed: mutator !== null,
    mutator,
  });
  const record: Architecture = {
    choices: { act_relu: "tanh", deep_fc2: "deeper" },
    graph_key: "k",
    nodes: [node("x", []), node("relu", ["x"], "act"), node("fc2", ["relu"], "deep"), node("output", ["fc2"])],
  };

  it("draws a SpaceModel trial's architecture and names the nodes changed from the base", async () => {
    renderTrial(trial({ has_architecture: true }), record);
    expect(await screen.findByTestId("architecture-summary")).toHaveTextContent(
      "2 of 4 nodes changed from the base: relu (act), fc2 (deep)",
    );
    expect(screen.getByText("Architecture")).toBeInTheDocument();
  });

  it("says so when the instance is the base itself", async () => {
    const base = { ...record, nodes: record.nodes.map((n) => ({ ...n, changed: false, mutator: null })) };
    renderTrial(trial({ has_architecture: true }), base);
    expect(await screen.findByTestId("architecture-summary")).toHaveTextContent("all 4 nodes as in the base");
  });

  it("asks for no architecture for a trial of an ordinary template", async () => {
    const calls = renderTrial(trial({ has_architecture: false }));
    await screen.findByTestId("warm-start");
    expect(calls.map((call) => call.path)).not.toContain("/trials/7/architecture");
    expect(screen.queryByText("Architecture")).toBeNull();
  });
});

describe("TrialPage fusion profile", () => {
  const measured = {
    max_group: 64,
    samples_per_s: { "1": 38848.8, "2": 33242.8, "4": 53991.0, "16": 66738.9 },
    best: 16,
    seconds: 3.8,
    reason: null,
  };

  it("shows a measured profile: rows/s by group size, the ratio to training alone, the chosen size marked", async () => {
    renderTrial(trial({ fusion_profile: measured }));
    const section = await screen.findByRole("region", { name: "fusion profile" });
    expect(within(section).getByText("Fusion profile")).toBeInTheDocument();
    expect(within(section).getByTestId("fusion-summary")).toHaveTextContent(
      "Measured in 3.8s before training: later trials of this structure train in groups of 16.",
    );
    expect(within(section).queryByTestId("fusion-reason")).toBeNull();
    const table = within(section).getByRole("table", { name: "fusion group sizes" });
    const rows = within(table)
      .getAllByRole("row")
      .slice(1)
      .map((row) => [...row.querySelectorAll("th, td")].map((cell) => cell.textContent));
    expect(rows).toEqual([
      ["1 (alone)", (38849).toLocaleString(), "1.00×", ""],
      ["2", (33243).toLocaleString(), "0.86×", ""],
      ["4", (53991).toLocaleString(), "1.39×", ""],
      ["16", (66739).toLocaleString(), "1.72×", "chosen"],
    ]);
    const chosen = within(table).getByText("chosen").closest("tr")!;
    expect(chosen).toHaveClass("chosen");
    expect(chosen).toHaveAttribute("aria-current", "true");
    expect(within(table).getAllByText("chosen")).toHaveLength(1);
  });

  it("says later trials train alone when no group size paid, and why the sizes stopped", async () => {
    const reason = "size 32 needs about 900 MiB of stack, over the 512 MiB";
    renderTrial(
      trial({ fusion_profile: { ...measured, samples_per_s: { "1": 40000, "2": 30000, "16": 42000 }, best: 1, reason } }),
    );
    const section = await screen.findByRole("region", { name: "fusion profile" });
    expect(within(section).getByTestId("fusion-summary")).toHaveTextContent(
      "Measured in 3.8s before training: later trials of this structure train alone: no group size beat training alone by 10%.",
    );
    expect(within(section).getByTestId("fusion-reason")).toHaveTextContent(`Reason: ${reason}`);
    const chosen = within(section).getByText("chosen").closest("tr")!;
    expect(within(chosen).getByRole("rowheader")).toHaveTextContent("1 (alone)");
    expect(within(section).getByText("1.05×")).toBeInTheDocument();
  });

  it("says a profile was asked for but none is stored, without a table", async () => {
    renderTrial(trial({ status: "ERRORED", score: null, error: "boom", fusion_profile: { max_group: 64 } }));
    const section = await screen.findByRole("region", { name: "fusion profile" });
    expect(within(section).getByTestId("fusion-summary")).toHaveTextContent(
      "Asked to measure fusion (up to 64 stacked copies); no measurement stored.",
    );
    expect(within(section).queryByRole("table")).toBeNull();
  });

  it("shows no fusion profile for a trial not asked to measure one", async () => {
    renderTrial(trial({}));
    await screen.findByTestId("warm-start");
    expect(screen.queryByRole("region", { name: "fusion profile" })).toBeNull();
    expect(screen.queryByText("Fusion profile")).toBeNull();
  });
});
