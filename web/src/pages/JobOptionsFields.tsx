import type { Model } from "../api/types";
import { Field } from "../components/Field";
import type { FieldErrors } from "../lib/forms";
import {
  FINAL_OPTIONS,
  FUSION_MODES,
  type JobOptions,
  type NumberOption,
  POLICY_HINTS,
  RULE_HINTS,
  SEARCH_POLICIES,
  SHARE_FROM,
  STOPPING_RULES,
  type SearchPolicy,
  hasFinalPhase,
  limitsOf,
} from "../lib/jobOptions";

/** The form fields of the job options, named as the API names them in its errors. */
export const OPTION_FIELDS = [
  "options.policies",
  ...FINAL_OPTIONS.map((spec) => `options.policies.${spec.name}`),
  "options.early_stopping",
  "options.warm_start",
  "options.fusion",
  "options.fusion.max_group",
] as const;

interface Props {
  options: JobOptions;
  setOptions: React.Dispatch<React.SetStateAction<JobOptions>>;
  errors: FieldErrors;
  /** The chosen templates: a policy one of them does not declare is off for it, and the form says so. */
  templates: Model[];
}

function declares(model: Model, policy: SearchPolicy): boolean {
  return Object.values(model.knob_config).some((knob) => knob.type === "PolicyKnob" && knob.policy === policy);
}

function GroupError({ message }: { message?: string }) {
  return message ? (
    <div className="field-error" role="alert">
      {message}
    </div>
  ) : null;
}

function NumberField(props: { spec: NumberOption; value: string; error?: string; onChange: (value: string) => void }) {
  const { spec } = props;
  return (
    <Field label={spec.name} error={props.error} hint={`${spec.hint} (${limitsOf(spec)})`}>
      {(aria) => (
        <input
          {...aria}
          type="number"
          min={spec.min}
          step={spec.whole ? 1 : "any"}
          placeholder={spec.fallback}
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

/** Policies, early stopping, fusion and warm start: the job options as controls (see lib/jobOptions). */
export function JobOptionsFields({ options, setOptions, errors, templates }: Props) {
  const set = (change: Partial<JobOptions>) => setOptions((o) => ({ ...o, ...change }));
  const policiesError = errors["options.policies"];
  const stoppingError = errors["options.early_stopping"];
  return (
    <>
      <fieldset className={policiesError ? "field-invalid" : undefined}>
        <legend>Policies</legend>
        {SEARCH_POLICIES.map((policy) => {
          const undeclared = templates.filter((model) => !declares(model, policy)).map((model) => model.name);
          return (
            <div key={policy}>
              <label className="check">
                <input
                  type="checkbox"
                  checked={options.policies[policy]}
                  onChange={(e) => setOptions((o) => ({ ...o, policies: { ...o.policies, [policy]: e.target.checked } }))}
                />
                {policy} <span className="muted">{POLICY_HINTS[policy]}</span>
              </label>
              {options.policies[policy] && undeclared.length > 0 && (
                <div className="hint">
                  off for {undeclared.join(", ")}: {undeclared.length > 1 ? "their templates do" : "its template does"} not declare{" "}
                  {policy}
                </div>
              )}
            </div>
          );
        })}
        <div className="form-grid">
          {options.policies.SHARE_PARAMS && (
            <Field label="Share from">
              {(aria) => (
                <select {...aria} value={options.shareFrom} onChange={(e) => set({ shareFrom: e.target.value as JobOptions["shareFrom"] })}>
                  {Object.entries(SHARE_FROM).map(([value, label]) => (
                    <option key={value} value={value}>
                      {label}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          )}
          {hasFinalPhase(options) &&
            FINAL_OPTIONS.map((spec) => (
              <NumberField
                key={spec.name}
                spec={spec}
                value={options.final[spec.name] ?? ""}
                error={errors[`options.policies.${spec.name}`]}
                onChange={(value) => setOptions((o) => ({ ...o, final: { ...o.final, [spec.name]: value } }))}
              />
            ))}
        </div>
        <GroupError message={policiesError} />
      </fieldset>

      <fieldset className={stoppingError ? "field-invalid" : undefined}>
        <legend>Early stopping</legend>
        <div className="form-grid">
          <Field label="Rule" hint={RULE_HINTS[options.rule]}>
            {(aria) => (
              <select {...aria} value={options.rule} onChange={(e) => set({ rule: e.target.value })}>
                {Object.keys(STOPPING_RULES).map((rule) => (
                  <option key={rule}>{rule}</option>
                ))}
              </select>
            )}
          </Field>
          {STOPPING_RULES[options.rule].map((spec) => (
            <NumberField
              key={spec.name}
              spec={spec}
              value={options.ruleOptions[spec.name] ?? ""}
              onChange={(value) => setOptions((o) => ({ ...o, ruleOptions: { ...o.ruleOptions, [spec.name]: value } }))}
            />
          ))}
          {options.rule !== "none" && (
            <>
              <Field label="Metric" hint="the interim metric it reads; blank: val_score, score, then train_score">
                {(aria) => <input {...aria} value={options.metric} onChange={(e) => set({ metric: e.target.value })} />}
              </Field>
              <Field label="Mode">
                {(aria) => (
                  <select {...aria} value={options.mode} onChange={(e) => set({ mode: e.target.value as JobOptions["mode"] })}>
                    <option value="max">max: higher is better</option>
                    <option value="min">min: lower is better</option>
                  </select>
                )}
              </Field>
            </>
          )}
        </div>
        <GroupError message={stoppingError} />
      </fieldset>

      <div className="form-grid">
        <Field label="Fusion" error={errors["options.fusion"]} hint="structurally identical trials run stacked as one computation; auto (experimental): where measured profiles say it pays">
          {(aria) => (
            <select {...aria} value={options.fusion} onChange={(e) => set({ fusion: e.target.value as JobOptions["fusion"] })}>
              {Object.entries(FUSION_MODES).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          )}
        </Field>
        {options.fusion === "max_group" && (
          <Field label="K" error={errors["options.fusion.max_group"]} hint="the most trials in one fused group (a whole number >= 1)">
            {(aria) => (
              <input {...aria} type="number" min={1} step={1} value={options.maxGroup} onChange={(e) => set({ maxGroup: e.target.value })} />
            )}
          </Field>
        )}
        <div className={`field${errors["options.warm_start"] ? " field-invalid" : ""}`}>
          <label className="check">
            <input type="checkbox" checked={options.warmStart} onChange={(e) => set({ warmStart: e.target.checked })} />
            Warm start
          </label>
          <div className="hint">TorchModel trials start from the most similar model of the zoo</div>
          <GroupError message={errors["options.warm_start"]} />
        </div>
      </div>
    </>
  );
}
