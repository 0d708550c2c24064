import { ApiError, messageOf } from "../api/client";

/** Error messages by form field; `_form` holds what belongs to no field. */
export type FieldErrors = Record<string, string>;
export const FORM = "_form";

/**
 * The form field an API error field belongs to, among `fields`.
 *
 * The API names fields as the request has them: `budget.TIME_HOURS`, `model_ids[2]`,
 * `train_args.seed`, `queries[0]`. A form shows them beside the input that holds that part
 * of the request, so the name is tried as it is, then without its index, then shorter by
 * one `.part` at a time.
 */
export function fieldFor(apiField: string | null, fields: readonly string[]): string | null {
  if (!apiField) return null;
  let name = apiField;
  for (;;) {
    if (fields.includes(name)) return name;
    const unindexed = name.replace(/\[\d+\]$/, "");
    if (unindexed !== name) {
      name = unindexed;
      continue;
    }
    const dot = name.lastIndexOf(".");
    if (dot < 0) return null;
    name = name.slice(0, dot);
  }
}

/** A check the form makes before asking the API, naming the field as the API would (`options.fusion`). */
export class FieldError extends Error {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.name = "FieldError";
    this.field = field;
  }
}

/** `error` as form errors: beside its field when the API (or the form's own check) named one the form shows, else for the whole form. */
export function formErrors(error: unknown, fields: readonly string[]): FieldErrors {
  if (error instanceof ApiError || error instanceof FieldError) {
    const field = fieldFor(error.field, fields);
    return { [field ?? FORM]: error.message };
  }
  return { [FORM]: messageOf(error) };
}

/** A typed number as the API should see it: left out when blank, a number when it is one, else the text (for the API to name). */
export function typedNumber(text: string): number | string | undefined {
  if (!text.trim()) return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : text;
}

/** `{"name": "version"}` from lines such as `scikit-learn==1.5.2`; throws naming the bad line. */
export function parseDependencies(text: string): Record<string, string> {
  const dependencies: Record<string, string> = {};
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (!line || line.startsWith("#")) return;
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==|\s)\s*(\S+)$/.exec(line);
    if (!match) throw new Error(`line ${index + 1}: write one package a line as name==version, e.g. numpy==2.4.6`);
    dependencies[match[1]] = match[2];
  });
  return dependencies;
}

/** A JSON object typed in a text area; throws a message for anything else. */
export function parseJsonObject(text: string, what: string): Record<string, unknown> {
  if (!text.trim()) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${messageOf(e)}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object, e.g. {"epochs": 3}`);
  }
  return value as Record<string, unknown>;
}
