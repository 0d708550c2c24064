import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";

import type { TrainJob } from "../api/types";
import { JobFusionProfiling } from "./JobFusionProfiling";

function job(fusion_profiling: TrainJob["fusion_profiling"]): TrainJob {
  return { fusion_profiling } as TrainJob;
}

describe("JobFusionProfiling", () => {
  it("says per sub-job whether its trials measure fusion profiles, and why", () => {
    render(
      <JobFusionProfiling
        job={job({
          "3": { model: "TorchCnn", decision: "skip", reason: "sizes 8 and 16 trained slower than size 1 on cpu", at: "2026-11-29T06:00:00Z" },
          "4": { model: "Mlp", decision: "profile", reason: "profiling used 1% of the slot-seconds", at: "2026-11-29T06:01:00Z" },
        })}
      />,
    );
    expect(screen.getByTestId("profiling-3")).toHaveTextContent(
      "TorchCnn skips profiling: sizes 8 and 16 trained slower than size 1 on cpu",
    );
    expect(screen.getByTestId("profiling-4")).toHaveTextContent("Mlp measures profiles: profiling used 1% of the slot-seconds");
  });

  it("shows nothing when the job does not use fusion auto", () => {
    const { container } = render(<JobFusionProfiling job={job(null)} />);
    expect(container).toBeEmptyDOMElement();
  });
});
