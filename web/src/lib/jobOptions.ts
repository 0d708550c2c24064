import { messageOf } from "../api/client";
import { FieldError, parseJsonObject, typedNumber } from "./forms";

/**
 * A train job's options as the create form sets them, and the `options` they write.
 *
 * The names and limits are the server's (baobab/advisor/_job_options.py and the stopping
 * rules' classes), which checks them when the job is created and names the field at fault
 * (`options.policies.final_trials`); the form offers nothing else, and leaves a key out while
 * its control is at the default, so a job asks for exactly what the user changed.
 */

/** A number option: its name in `options`, the limits the server holds it to, and its default. */
export interface NumberOption {
  name: string;
  whole: boolean;
  min: number;
  /** An exclusive upper limit, where there is one. */
  below?: number;
  /** What the server takes when the option is left out; blank when that is "none". */
  fallback: string;
  hint: string;
}

/** The limits as the hint beside the input says them: "a whole number >= 2". */
export function limitsOf(spec: NumberOption): string {
  if (spec.below !== undefined) return `a number in [${spec.min}, ${spec.below})`;
  return `a ${spec.whole ? "whole " : ""}number >= ${spec.min}`;
}

export const SEARCH_POLICIES = ["EARLY_STOP", "DOWNSCALE", "SHARE_PARAMS"] as const;
export type SearchPolicy = (typeof SEARCH_POLICIES)[number];

export const POLICY_HINTS: Record<SearchPolicy, string> = {
  EARLY_STOP: "search trials train briefly; the best configurations are retrained in full",
  DOWNSCALE: "search trials train a smaller model; the best configurations are retrained in full",
  SHARE_PARAMS: "a trial starts from parameters an earlier trial of its template produced",
};

/** The policies that make a search trial cheaper than its final model: they add a final phase. */
const REDUCING: readonly SearchPolicy[] = ["EARLY_STOP", "DOWNSCALE"];

export const SHARE_FROM = {
  recent: "recent: the latest parameters of the template's trials",
  best: "best: the best-scored trial's",
} as const;
type ShareFrom = keyof typeof SHARE_FROM;

export const FINAL_OPTIONS: readonly NumberOption[] = [
  { name: "final_trials", whole: true, min: 1, fallback: "1", hint: "the best configurations retrained in full" },
  {
    name: "final_factor",
    whole: false,
    min: 1,
    fallback: "4",
    hint: "the final phase starts once the time left is at most this many median search trials",
  },
  { name: "final_fraction", whole: false, min: 0, below: 1, fallback: "0.2", hint: "or this share of TIME_HOURS, if larger" },
];

/** The stopping rules the server knows (`STOPPING_RULES`), each with its own options. */
export const STOPPING_RULES: Record<string, readonly NumberOption[]> = {
  none: [],
  asha: [
    { name: "eta", whole: true, min: 2, fallback: "3", hint: "the top 1/eta of each rung goes on" },
    { name: "min_resource", whole: true, min: 1, fallback: "1", hint: "the step of the first rung" },
    { name: "max_resource", whole: true, min: 1, fallback: "", hint: "no rung at or past this step; blank: none" },
  ],
  median: [
    { name: "grace_steps", whole: true, min: 0, fallback: "1", hint: "no trial is stopped at a step below this" },
    { name: "min_trials", whole: true, min: 1, fallback: "3", hint: "completed trials needed before one is stopped" },
  ],
};

export const RULE_HINTS: Record<string, string> = {
  none: "every trial runs to its end",
  asha: "asynchronous successive halving",
  median: "stops a trial below the median of completed ones",
};

export const FUSION_MODES = {
  off: "off",
  auto: "auto (experimental)",
  max_group: "max_group: at most K trials a group",
} as const;
type FusionMode = keyof typeof FUSION_MODES;

export interface JobOptions {
  policies: Record<SearchPolicy, boolean>;
  shareFrom: ShareFrom;
  /** Typed text by option name; written only while a policy that adds a final phase is on. */
  final: Record<string, string>;
  rule: string;
  /** Typed text by option name; only the chosen rule's are written. */
  ruleOptions: Record<string, string>;
  /** Blank: the first of the metrics the server looks for by default. */
  metric: string;
  mode: "max" | "min";
  warmStart: boolean;
  fusion: FusionMode;
  maxGroup: string;
}

export const DEFAULT_JOB_OPTIONS: JobOptions = {
  policies: { EARLY_STOP: false, DOWNSCALE: false, SHARE_PARAMS: false },
  shareFrom: "recent",
  final: {},
  rule: "none",
  ruleOptions: {},
  metric: "",
  mode: "max",
  warmStart: true,
  fusion: "off",
  maxGroup: "",
};

/** The options the controls set, with the control that sets each (for the error that names it). */
export const OPTION_CONTROLS = {
  policies: "Policies",
  early_stopping: "Early stopping",
  warm_start: "Warm start",
  fusion: "Fusion",
} as const;

export function hasFinalPhase(options: JobOptions): boolean {
  return REDUCING.some((policy) => options.policies[policy]);
}

/** Typed numbers by name, blank ones left out. */
function typedNumbers(specs: readonly NumberOption[], typed: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const spec of specs) {
    const value = typedNumber(typed[spec.name] ?? "");
    if (value !== undefined) out[spec.name] = value;
  }
  return out;
}

function policiesArg(options: JobOptions): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const policy of SEARCH_POLICIES) {
    if (options.policies[policy]) out[policy] = policy === "SHARE_PARAMS" ? options.shareFrom : true;
  }
  if (!Object.keys(out).length) return undefined;
  return hasFinalPhase(options) ? { ...out, ...typedNumbers(FINAL_OPTIONS, options.final) } : out;
}

function earlyStoppingArg(options: JobOptions): Record<string, unknown> | undefined {
  if (options.rule === "none") return undefined;
  const out: Record<string, unknown> = { rule: options.rule, ...typedNumbers(STOPPING_RULES[options.rule], options.ruleOptions) };
  if (options.metric.trim()) out.metric = options.metric.trim();
  if (options.mode !== "max") out.mode = options.mode;
  return out;
}

function fusionArg(options: JobOptions): unknown {
  if (options.fusion !== "max_group") return options.fusion === "off" ? undefined : options.fusion;
  const size = typedNumber(options.maxGroup);
  if (typeof size !== "number" || !Number.isInteger(size) || size < 1) {
    const got = options.maxGroup.trim() ? options.maxGroup : "nothing";
    throw new FieldError("options.fusion.max_group", `fusion max_group must be a whole number >= 1 (the most trials a group), got ${got}`);
  }
  return { max_group: size };
}

/**
 * The job's `options`: those the controls set, none while every control is at its default.
 *
 * Throws a FieldError naming the control whose value the server would refuse.
 */
export function jobOptionsFrom(options: JobOptions): Record<string, unknown> {
  const args: Record<string, unknown> = {
    policies: policiesArg(options),
    early_stopping: earlyStoppingArg(options),
    warm_start: options.warmStart ? undefined : false,
    fusion: fusionArg(options),
  };
  return Object.fromEntries(Object.entries(args).filter(([, value]) => value !== undefined));
}

/** The control that sets a tabular job's `target` field (the datasets' target column). */
export const TARGET_CONTROL = "Target column";

/**
 * The job's `train_args`: what was typed as JSON (template arguments such as "epochs"), which
 * train() receives and nothing else. A job option typed there is refused, pointing at its
 * control, and so is a tabular job's "target", which is the job's own field (the server takes
 * those old forms only for one release, with a warning); an image job's "target" is one more
 * argument of its train().
 *
 * Throws a FieldError naming `train_args`.
 */
export function trainArgsFrom(typed: string, tabular = false): Record<string, unknown> {
  let args: Record<string, unknown>;
  try {
    args = parseJsonObject(typed, "train args");
  } catch (e) {
    throw new FieldError("train_args", messageOf(e));
  }
  const owners: Record<string, string> = tabular ? { ...OPTION_CONTROLS, target: TARGET_CONTROL } : OPTION_CONTROLS;
  const owned = Object.keys(owners).filter((key) => key in args);
  if (owned.length) {
    const keys = owned.map((key) => `"${key}"`).join(", ");
    const controls = owned.map((key) => owners[key]).join(", ");
    throw new FieldError("train_args", `train args set ${keys}, which the form's controls set (${controls}): remove ${owned.length > 1 ? "them" : "it"} here and use the controls`);
  }
  return args;
}
