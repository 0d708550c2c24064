import { describe, expect, it } from "vitest";

import type { FusionMeasurement } from "../api/types";
import { formatRate, formatRatio, fusionRows, fusionSummary, isMeasured } from "./fusion";

const measured: FusionMeasurement = {
  max_group: 64,
  // Out of order on purpose: the rows come smallest first.
  samples_per_s: { "16": 66738.9, "1": 38848.8, "4": 53991.0, "2": 33242.8 },
  best: 16,
  seconds: 3.8,
  reason: null,
};

describe("isMeasured", () => {
  it("tells a request from a measurement", () => {
    expect(isMeasured({ max_group: 64 })).toBe(false);
    expect(isMeasured(measured)).toBe(true);
  });
});

describe("fusionRows", () => {
  it("lists the sizes smallest first, each with its ratio to training alone, the chosen one marked", () => {
    const rows = fusionRows(measured);
    expect(rows.map((row) => row.size)).toEqual([1, 2, 4, 16]);
    expect(rows.map((row) => formatRatio(row.ratio))).toEqual(["1.00×", "0.86×", "1.39×", "1.72×"]);
    expect(rows.filter((row) => row.chosen).map((row) => row.size)).toEqual([16]);
    expect(rows[3].rate).toBe(66738.9);
  });

  it("gives no ratio without a rate for size 1", () => {
    const rows = fusionRows({ ...measured, samples_per_s: { "1": 0, "2": 10 }, best: 1 });
    expect(rows.map((row) => row.ratio)).toEqual([null, null]);
    expect(rows.map((row) => row.chosen)).toEqual([true, false]);
  });

  it("has no rows when nothing was measured", () => {
    expect(fusionRows({ ...measured, samples_per_s: {}, best: 1 })).toEqual([]);
  });
});

describe("formatRate and formatRatio", () => {
  it("shows rows per second whole from 100 up, with a decimal below", () => {
    expect(formatRate(38848.8)).toBe((38849).toLocaleString());
    expect(formatRate(100)).toBe("100");
    expect(formatRate(12.34)).toBe("12.3");
    expect(formatRate(0)).toBe("0");
  });

  it("shows a ratio to two decimals, or a dash without one", () => {
    expect(formatRatio(66738.9 / 38848.8)).toBe("1.72×");
    expect(formatRatio(null)).toBe("—");
    expect(formatRatio(Infinity)).toBe("—");
  });
});

describe("fusionSummary", () => {
  it("names the chosen group size and what measuring took", () => {
    expect(fusionSummary(measured)).toBe(
      "Measured in 3.8s before training: later trials of this structure train in groups of 16.",
    );
  });

  it("says why later trials train alone when no size paid", () => {
    const alone = { ...measured, samples_per_s: { "1": 1000, "2": 1050 }, best: 1, seconds: 12.4 };
    expect(fusionSummary(alone)).toBe(
      "Measured in 12s before training: later trials of this structure train alone: no group size beat training alone by 10%.",
    );
  });

  it("does not claim sizes were compared when only training alone was measured", () => {
    const only = { ...measured, samples_per_s: { "1": 1000 }, best: 1, seconds: 0.6, reason: "size 2 needs about 900 MiB of stack, over the 512 MiB" };
    expect(fusionSummary(only)).toBe(
      "Measured in 0.6s before training: later trials of this structure train alone: no group size was measured besides training alone.",
    );
  });

  it("says nothing was measured when the worker could not measure", () => {
    const none = { ...measured, samples_per_s: {}, best: 1, seconds: 0, reason: "not a TorchModel: its trials train alone" };
    expect(fusionSummary(none)).toBe("Nothing measured before training: later trials of this structure train alone.");
  });

  it("says a request alone was never measured", () => {
    expect(fusionSummary({ max_group: 64 })).toBe(
      "Asked to measure fusion (up to 64 stacked copies); no measurement stored.",
    );
    expect(fusionSummary({ max_group: 12, budget_s: 2.4 })).toBe(
      "Asked to measure fusion (up to 12 stacked copies, within 2.4s); no measurement stored.",
    );
  });
});
