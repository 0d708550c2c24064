import { describe, expect, it } from "vitest";

import { ApiError } from "../api/client";
import { FORM, fieldFor, formErrors, parseDependencies, parseJsonObject } from "./forms";

const JOB_FIELDS = ["app", "model_ids", "budget", "budget.TIME_HOURS", "train_args"];

describe("fieldFor", () => {
  it("puts an API field beside the form field that holds it", () => {
    expect(fieldFor("budget.TIME_HOURS", JOB_FIELDS)).toBe("budget.TIME_HOURS");
    expect(fieldFor("budget.GPU_COUNT", JOB_FIELDS)).toBe("budget");
    expect(fieldFor("model_ids[3]", JOB_FIELDS)).toBe("model_ids");
    expect(fieldFor("train_args.seed", JOB_FIELDS)).toBe("train_args");
    expect(fieldFor("queries[0]", ["queries"])).toBe("queries");
  });

  it("gives null for a field the form does not show, or none", () => {
    expect(fieldFor("strategy", JOB_FIELDS)).toBeNull();
    expect(fieldFor(null, JOB_FIELDS)).toBeNull();
  });
});

describe("formErrors", () => {
  it("keeps the API's message, beside its field or for the whole form", () => {
    const beside = formErrors(new ApiError(400, "bad_request", "budget.TIME_HOURS: must be above 0", "budget.TIME_HOURS"), JOB_FIELDS);
    expect(beside).toEqual({ "budget.TIME_HOURS": "budget.TIME_HOURS: must be above 0" });
    const whole = formErrors(new ApiError(409, "conflict", "try again", null), JOB_FIELDS);
    expect(whole).toEqual({ [FORM]: "try again" });
    expect(formErrors(new Error("offline"), JOB_FIELDS)).toEqual({ [FORM]: "offline" });
  });
});

describe("parseDependencies", () => {
  it("reads name==version lines, skipping blanks and comments", () => {
    expect(parseDependencies("scikit-learn==1.9.1\n\n# a comment\ntorch 2.13.0\n")).toEqual({
      "scikit-learn": "1.9.1",
      torch: "2.13.0",
    });
  });

  it("names the line it cannot read", () => {
    expect(() => parseDependencies("numpy==2.4.6\nnot a dependency line")).toThrow(/line 2/);
  });
});

describe("parseJsonObject", () => {
  it("takes an object, blank as empty, and refuses the rest with a message", () => {
    expect(parseJsonObject('{"target": "label"}', "train args")).toEqual({ target: "label" });
    expect(parseJsonObject("  ", "train args")).toEqual({});
    expect(() => parseJsonObject("[1]", "train args")).toThrow(/must be a JSON object/);
    expect(() => parseJsonObject("{oops", "train args")).toThrow(/train args is not valid JSON/);
  });
});
