import { render, screen, waitFor } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";

import type { TimeBreakdown } from "../api/types";
import type { Built } from "../lib/charts";
import { timeBreakdownOption } from "../lib/timeBreakdown";
import { mockApi } from "../test/api";
import { JobTimeBreakdown } from "./JobTimeBreakdown";

// jsdom has no canvas: the chart shows the series it was given instead of drawing them.
vi.mock("../components/Chart", () => ({
  Chart: ({ built, testId }: { built: Built; testId: string }) => (
    <div data-testid={testId}>
      {((built.option.series ?? []) as { name: string; data: { value: number }[] }[])
        .map((s) => `${s.name}=${s.data[0].value.toFixed(1)}`)
        .join(";")}
    </div>
  ),
}));

const PHASES = ["wait", "fetch", "warm_start", "profile", "build", "train", "evaluate", "store"];

function breakdown(seconds: Partial<Record<string, number>>): TimeBreakdown {
  const all = Object.fromEntries(PHASES.map((p) => [p, seconds[p] ?? 0]));
  const total = Object.values(all).reduce((a, b) => a + b, 0);
  return { phases: PHASES, seconds: all, total_s: total, trials: 3, sub_jobs: [] };
}

describe("JobTimeBreakdown", () => {
  it("stacks the phases that took time, and lists every phase in seconds and percent", async () => {
    // The case the issue tells of: a job whose fusion profiling took 27% of its time.
    const answer = breakdown({ wait: 3, fetch: 5, profile: 27, train: 60, evaluate: 4, store: 1 });
    const calls = mockApi({ "GET /train_jobs/fraud%2Fx/2/time_breakdown": [200, answer] });
    render(<JobTimeBreakdown app="fraud/x" version={2} progress="1" />);

    await waitFor(() => expect(screen.getByTestId("time-legend")).toBeInTheDocument());
    expect(calls.map((c) => c.path)).toEqual(["/train_jobs/fraud%2Fx/2/time_breakdown"]);
    expect(screen.getByTestId("time-total")).toHaveTextContent("1m 40s over 3 trials");
    expect(screen.getByTestId("time-profile")).toHaveTextContent("fusion profiling 27s (27.0%)");
    expect(screen.getByTestId("time-train")).toHaveTextContent("training 1m 00s (60.0%)");
    expect(screen.getByTestId("time-warm_start")).toHaveTextContent("warm start 0.0s (0.0%)");
    expect(screen.getByTestId("time-chart").textContent).toBe(
      "waiting for a slot=3.0;loading template & data=5.0;fusion profiling=27.0;training=60.0;evaluation=4.0;saving parameters=1.0",
    );
  });

  it("reads the breakdown again when the job's progress changes", async () => {
    const calls = mockApi({ "GET /train_jobs/fraud/2/time_breakdown": [200, breakdown({ train: 1 })] });
    const { rerender } = render(<JobTimeBreakdown app="fraud" version={2} progress="1" />);
    await waitFor(() => expect(calls).toHaveLength(1));
    rerender(<JobTimeBreakdown app="fraud" version={2} progress="1" />);
    rerender(<JobTimeBreakdown app="fraud" version={2} progress="2" />);
    await waitFor(() => expect(calls).toHaveLength(2));
  });

  it("says so when the breakdown cannot be read", async () => {
    mockApi({});
    render(<JobTimeBreakdown app="fraud" version={2} progress="1" />);
    expect(await screen.findByRole("alert")).toHaveTextContent("no mock for GET /train_jobs/fraud/2/time_breakdown");
  });
});

describe("timeBreakdownOption", () => {
  it("draws nothing but a message before any trial ran", () => {
    const built = timeBreakdownOption(breakdown({}));
    expect(built.shown).toBe(0);
    expect(built.option.series).toEqual([]);
    expect(built.option.title).toMatchObject({ text: "no trial has run yet" });
  });

  it("gives each drawn phase its colour and labels only the segments wide enough to hold one", () => {
    const built = timeBreakdownOption(breakdown({ wait: 5, train: 95 }));
    expect(built.option.color).toEqual(["#9aa3ad", "#2f7d4f"]);
    const series = built.option.series as { stack: string; label: { show: boolean; formatter: string } }[];
    expect(series.map((s) => [s.stack, s.label.show, s.label.formatter])).toEqual([
      ["time", false, "5%"],
      ["time", true, "95%"],
    ]);
  });
});
