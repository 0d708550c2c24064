import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";

import type { SubJob, Trial } from "../api/types";
import { apiError, mockApi } from "../test/api";
import { TrialsTable, nextSort } from "./TrialsTable";

function trial(id: number, status: Trial["status"], score: number | null): Trial {
  return {
    id,
    train_job_id: 1,
    sub_job_id: 1,
    model_id: 5,
    model_name: "forest",
    number: id - 1,
    knobs: { lr: 0.01, depth: id },
    policies: { EARLY_STOP: id === 2 },
    status,
    score,
    created_at: "2030-01-01T00:00:00+00:00",
    started_at: null,
    finished_at: null,
    duration_s: score === null ? null : 125,
    worker: "local-0",
    attempts: 1,
    error: null,
    has_params: score !== null,
    parent_zoo_model_id: null,
    similarity: null,
    fused_group: null,
    fusion_profile: null,
  };
}

const SUB_JOBS = [{ id: 1, model_id: 5, model_name: "forest" }] as SubJob[];
const BASE = "/train_jobs/fraud/2/trials";

function renderTable(onSelect: (ids: number[]) => void = () => undefined, selected: number[] = []) {
  render(
    <MemoryRouter>
      <TrialsTable app="fraud" version={2} subJobs={SUB_JOBS} revision={0} selected={selected} onSelect={onSelect} maxSelected={2} />
    </MemoryRouter>,
  );
}

describe("nextSort", () => {
  it("starts a column in its first direction and flips it on the next click", () => {
    expect(nextSort("-score", "number", "")).toBe("number");
    expect(nextSort("number", "number", "")).toBe("-number");
    expect(nextSort("-number", "number", "")).toBe("number");
    expect(nextSort("number", "score", "-")).toBe("-score");
    expect(nextSort("-score", "score", "-")).toBe("score");
  });
});

describe("TrialsTable", () => {
  it("asks the server for each sort, filter and page, and shows what it answers", async () => {
    const calls = mockApi({
      [`GET ${BASE}`]: (call) => {
        const query = new URLSearchParams(call.path.split("?")[1]);
        const rows = query.get("sort") === "number" ? [trial(1, "COMPLETED", 0.5), trial(2, "RUNNING", null)] : [trial(2, "RUNNING", null), trial(1, "COMPLETED", 0.5)];
        return [200, { trials: rows, total: 60, page: Number(query.get("page")), per_page: 25 }];
      },
    });
    renderTable();
    const table = await screen.findByRole("table", { name: "trials table" });
    await waitFor(() => expect(within(table).getAllByRole("row")).toHaveLength(3));
    expect(calls.at(-1)!.path).toBe(`${BASE}?page=1&per_page=25&sort=-score`);
    expect(screen.getByRole("columnheader", { name: /Score/ })).toHaveAttribute("aria-sort", "descending");

    const user = userEvent.setup();
    await user.click(screen.getByRole("button", { name: "#" }));
    await waitFor(() => expect(calls.at(-1)!.path).toBe(`${BASE}?page=1&per_page=25&sort=number`));
    await waitFor(() => expect(within(table).getAllByRole("row")[1]).toHaveTextContent("0"));
    expect(screen.getByRole("columnheader", { name: /#/ })).toHaveAttribute("aria-sort", "ascending");

    await user.selectOptions(screen.getByLabelText("filter by status"), "RUNNING");
    await waitFor(() => expect(calls.at(-1)!.path).toBe(`${BASE}?page=1&per_page=25&sort=number&status=RUNNING`));

    await user.click(screen.getByRole("button", { name: "next page" }));
    await waitFor(() => expect(calls.at(-1)!.path).toBe(`${BASE}?page=2&per_page=25&sort=number&status=RUNNING`));
    expect(screen.getByText("26–50 of 60")).toBeInTheDocument();
  });

  it("shows knobs, policies, score and a stop button for open trials only; a refused stop says why", async () => {
    const calls = mockApi({
      [`GET ${BASE}`]: [200, { trials: [trial(1, "COMPLETED", 0.5), trial(2, "RUNNING", null)], total: 2, page: 1, per_page: 25 }],
      "POST /trials/2/stop": apiError(409, "trial 2 is COMPLETED already; only a PENDING or RUNNING trial can be stopped"),
    });
    renderTable();
    const table = await screen.findByRole("table", { name: "trials table" });
    await waitFor(() => expect(within(table).getAllByRole("row")).toHaveLength(3));
    const [, done, running] = within(table).getAllByRole("row");
    expect(done).toHaveTextContent("lr=0.01 depth=1");
    expect(done).toHaveTextContent("0.5000");
    expect(done).toHaveTextContent("2m 05s");
    expect(within(done).queryByRole("button", { name: "Stop" })).not.toBeInTheDocument();
    expect(within(running).getByText("EARLY_STOP")).toBeInTheDocument();

    await userEvent.setup().click(within(running).getByRole("button", { name: "Stop" }));
    expect(calls.some((c) => c.method === "POST" && c.path === "/trials/2/stop")).toBe(true);
    expect(await screen.findByText(/only a PENDING or RUNNING trial can be stopped/)).toBeInTheDocument();
  });

  it("marks the trials that trained fused, linking to their group's first trial", async () => {
    const group = { id: 1, size: 2 };
    const rows = [{ ...trial(1, "COMPLETED", 0.5), fused_group: group }, { ...trial(2, "COMPLETED", 0.6), fused_group: group }, trial(3, "COMPLETED", 0.4)];
    mockApi({ [`GET ${BASE}`]: [200, { trials: rows, total: 3, page: 1, per_page: 25 }] });
    renderTable();
    const table = await screen.findByRole("table", { name: "trials table" });
    await waitFor(() => expect(within(table).getAllByRole("row")).toHaveLength(4));
    const [, first, second, alone] = within(table).getAllByRole("row");
    for (const row of [first, second]) {
      expect(within(row).getByRole("link", { name: "fused ×2" })).toHaveAttribute("href", "/jobs/fraud/2/trials/1");
    }
    expect(within(alone).queryByText(/fused/)).not.toBeInTheDocument();
  });

  it("selects trials for the metric chart, keeping the latest few", async () => {
    mockApi({ [`GET ${BASE}`]: [200, { trials: [trial(1, "COMPLETED", 0.5), trial(2, "COMPLETED", 0.6)], total: 2, page: 1, per_page: 25 }] });
    const picks: number[][] = [];
    renderTable((ids) => picks.push(ids), [7, 8]);
    await userEvent.setup().click(await screen.findByRole("checkbox", { name: "select trial 0" }));
    expect(picks).toEqual([[8, 1]]);
  });
});
