import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";

import type { TrainJob } from "../api/types";
import { JobGpuShare } from "./JobGpuShare";

function job(gpu_share: TrainJob["gpu_share"]): TrainJob {
  return { gpu_share } as TrainJob;
}

describe("JobGpuShare", () => {
  it("says how many trials share each GPU, why, and which ran again alone", () => {
    render(
      <JobGpuShare
        job={job({
          level: 2,
          settled: true,
          peak_mb: 1508,
          device_mb: 143155,
          changes: [
            { level: 2, reason: "one per GPU measured" },
            { level: 4, reason: "2 per GPU ran 1.60x as fast as 1" },
            { level: 2, reason: "trial 12 ran out of GPU memory at 4 per GPU" },
          ],
          retried_alone: [12, 13],
        })}
      />,
    );
    expect(screen.getByTestId("gpu-share-level")).toHaveTextContent(
      "2 trials per GPU (settled); the largest trial needed 1,508 MiB of 143,155 MiB.",
    );
    expect(screen.getByTestId("gpu-share-change-2")).toHaveTextContent("2 per GPU: trial 12 ran out of GPU memory at 4 per GPU");
    expect(screen.getByTestId("gpu-share-retried")).toHaveTextContent("ran again alone: trials 12, 13.");
  });

  it("shows nothing for a job that does not share its GPUs", () => {
    const { container } = render(<JobGpuShare job={job(null)} />);
    expect(container).toBeEmptyDOMElement();
  });
});
