import { useMemo, useState } from "react";
import { Link, useNavigate } from "react-router";

import { get, post } from "../api/client";
import type { Dataset, Model, TrainJob } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { FORM, type FieldErrors, formErrors, typedNumber } from "../lib/forms";
import { useApiEnums } from "../lib/enums";
import { useLoad } from "../lib/hooks";
import { DEFAULT_JOB_OPTIONS, TARGET_CONTROL, jobOptionsFrom, trainArgsFrom } from "../lib/jobOptions";
import { JobOptionsFields, OPTION_FIELDS } from "./JobOptionsFields";

/** The form fields, named as the API names the fields of a create request. */
export const JOB_FIELDS = [
  "app",
  "task",
  "train_dataset_id",
  "val_dataset_id",
  "model_ids",
  "budget",
  "budget.GPU_COUNT",
  "budget.TIME_HOURS",
  "budget.MODEL_TRIAL_COUNT",
  "strategy",
  "target",
  "train_args",
  "options",
  ...OPTION_FIELDS,
] as const;

const BUDGET_KEYS = ["GPU_COUNT", "TIME_HOURS", "MODEL_TRIAL_COUNT"] as const;
type BudgetKey = (typeof BUDGET_KEYS)[number];

const BUDGET_HINTS: Record<BudgetKey, string> = {
  GPU_COUNT: "trials at once on GPUs; 0 runs them on CPU slots",
  TIME_HOURS: "the job ends after this many hours",
  MODEL_TRIAL_COUNT: "trials per model template",
};

function datasetFormat(task: string): Dataset["format"] {
  return task === "IMAGE_CLASSIFICATION" ? "IMAGE_FILES" : "TABULAR";
}

export function NewTrainJob() {
  const navigate = useNavigate();
  const { tasks, strategies } = useApiEnums();
  const datasets = useLoad((signal) => get<{ datasets: Dataset[] }>("/datasets", signal), "datasets");
  const models = useLoad((signal) => get<{ models: Model[] }>("/models", signal), "models");

  const [app, setApp] = useState("");
  const [task, setTask] = useState("");
  const [trainId, setTrainId] = useState("");
  const [valId, setValId] = useState("");
  const [modelIds, setModelIds] = useState<number[]>([]);
  const [budget, setBudget] = useState<Record<BudgetKey, string>>({ GPU_COUNT: "0", TIME_HOURS: "", MODEL_TRIAL_COUNT: "10" });
  const [strategy, setStrategy] = useState("auto");
  const [target, setTarget] = useState("");
  const [trainArgs, setTrainArgs] = useState("{}");
  const [options, setOptions] = useState(DEFAULT_JOB_OPTIONS);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);

  const chosenTask = task || tasks[0] || "";
  // Only a tabular job's datasets have a target column: an image job takes no target.
  const tabular = datasetFormat(chosenTask) === "TABULAR";
  const fitting = useMemo(
    () => (datasets.data?.datasets ?? []).filter((d) => d.format === datasetFormat(chosenTask)),
    [datasets.data, chosenTask],
  );
  const fittingModels = useMemo(() => (models.data?.models ?? []).filter((m) => m.task === chosenTask), [models.data, chosenTask]);
  const chosenModels = fittingModels.filter((m) => modelIds.includes(m.id));

  const toggleModel = (id: number) =>
    setModelIds((ids) => (ids.includes(id) ? ids.filter((other) => other !== id) : [...ids, id]));

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    let args: Record<string, unknown>;
    let jobOptions: Record<string, unknown>;
    try {
      args = trainArgsFrom(trainArgs, tabular);
      jobOptions = jobOptionsFrom(options);
    } catch (e) {
      setErrors(formErrors(e, JOB_FIELDS));
      return;
    }
    const budgetBody: Record<string, number | string> = {};
    for (const key of BUDGET_KEYS) {
      const value = typedNumber(budget[key]);
      if (value !== undefined) budgetBody[key] = value;
    }
    const body = {
      app,
      task: chosenTask,
      train_dataset_id: trainId ? Number(trainId) : null,
      val_dataset_id: valId ? Number(valId) : null,
      model_ids: modelIds.filter((id) => fittingModels.some((m) => m.id === id)),
      budget: budgetBody,
      strategy,
      // Left out when blank: train() keeps its own default. Sent as typed, for it must match the CSV's header.
      ...(tabular && target.trim() ? { target } : {}),
      train_args: args,
      options: jobOptions,
    };
    setBusy(true);
    setErrors({});
    try {
      const job = await post<TrainJob>("/train_jobs", body);
      navigate(`/jobs/${encodeURIComponent(job.app)}/${job.app_version}`);
    } catch (e) {
      setErrors(formErrors(e, JOB_FIELDS));
    } finally {
      setBusy(false);
    }
  };

  const datasetOptions = (
    <>
      <option value="">choose a {datasetFormat(chosenTask)} dataset</option>
      {fitting.map((d) => (
        <option key={d.id} value={d.id}>
          {d.name} (#{d.id})
        </option>
      ))}
    </>
  );

  return (
    <div className="page">
      <h1>New train job</h1>
      <ErrorBox message={datasets.error ?? models.error} />
      <form className="card form" onSubmit={submit} noValidate aria-label="create a train job">
        <div className="form-grid">
          <Field label="App" error={errors.app} hint="a name for what you train; each job is a new version of it">
            {(props) => <input {...props} value={app} onChange={(e) => setApp(e.target.value)} placeholder="fraud-detector" />}
          </Field>
          <Field label="Task" error={errors.task}>
            {(props) => (
              <select {...props} value={chosenTask} onChange={(e) => setTask(e.target.value)}>
                {tasks.map((t) => (
                  <option key={t}>{t}</option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Train dataset" error={errors.train_dataset_id}>
            {(props) => (
              <select {...props} value={trainId} onChange={(e) => setTrainId(e.target.value)}>
                {datasetOptions}
              </select>
            )}
          </Field>
          <Field label="Validation dataset" error={errors.val_dataset_id}>
            {(props) => (
              <select {...props} value={valId} onChange={(e) => setValId(e.target.value)}>
                {datasetOptions}
              </select>
            )}
          </Field>
          {tabular && (
            <Field
              label={TARGET_CONTROL}
              error={errors.target}
              hint="the datasets' column to predict, which train() receives as target; blank: the template's default"
            >
              {(props) => <input {...props} value={target} onChange={(e) => setTarget(e.target.value)} placeholder="target" />}
            </Field>
          )}
        </div>

        <fieldset className={`models-field${errors.model_ids ? " field-invalid" : ""}`}>
          <legend>Model templates</legend>
          {fittingModels.map((model) => (
            <label key={model.id} className="check">
              <input type="checkbox" checked={modelIds.includes(model.id)} onChange={() => toggleModel(model.id)} />
              {model.name} <span className="muted">({model.class_name}, #{model.id})</span>
            </label>
          ))}
          {!fittingModels.length && !models.loading && (
            <p className="muted">
              No {chosenTask} templates yet: <Link to="/models">upload one</Link>.
            </p>
          )}
          {errors.model_ids && (
            <div className="field-error" role="alert">
              {errors.model_ids}
            </div>
          )}
        </fieldset>

        <fieldset className={`budget-field${errors.budget ? " field-invalid" : ""}`}>
          <legend>Budget</legend>
          <div className="form-grid">
            {BUDGET_KEYS.map((key) => (
              <Field key={key} label={key} error={errors[`budget.${key}`]} hint={BUDGET_HINTS[key]}>
                {(props) => (
                  <input
                    {...props}
                    type="number"
                    step="any"
                    value={budget[key]}
                    onChange={(e) => setBudget((b) => ({ ...b, [key]: e.target.value }))}
                  />
                )}
              </Field>
            ))}
          </div>
          {errors.budget && (
            <div className="field-error" role="alert">
              {errors.budget}
            </div>
          )}
        </fieldset>

        <div className="form-grid">
          <Field label="Advisor" error={errors.strategy} hint="the search strategy; auto picks by the size of the search space">
            {(props) => (
              <select {...props} value={strategy} onChange={(e) => setStrategy(e.target.value)}>
                {strategies.map((s) => (
                  <option key={s}>{s}</option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Train args" error={errors.train_args} hint='keyword arguments of train(), as JSON, e.g. {"epochs": 20}; the target column and the job options have their own controls'>
            {(props) => <textarea {...props} rows={3} value={trainArgs} onChange={(e) => setTrainArgs(e.target.value)} />}
          </Field>
        </div>
        <JobOptionsFields options={options} setOptions={setOptions} errors={errors} templates={chosenModels} />
        <ErrorBox message={errors[FORM]} />
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Creating…" : "Create train job"}
        </button>
      </form>
    </div>
  );
}
