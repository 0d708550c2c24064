import { useMemo, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";

import { get, messageOf, post } from "../api/client";
import type { InferenceJob, Trial, TrainJobSummary } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { StatusBadge } from "../components/StatusBadge";
import { formatScore, formatTime } from "../lib/format";
import { FORM, type FieldErrors, formErrors, typedNumber } from "../lib/forms";
import { useLoad, usePolling } from "../lib/hooks";

const FIELDS = ["app", "app_version", "k", "trial_ids", "public", "request_log_rate"];

/** API keys are shown once, when the job is created; this tab keeps them for the playground. */
export function rememberApiKey(jobId: number, key: string): void {
  sessionStorage.setItem(`baobab.apiKey.${jobId}`, key);
}

export function rememberedApiKey(jobId: number): string {
  return sessionStorage.getItem(`baobab.apiKey.${jobId}`) ?? "";
}

function CreateForm({ jobs }: { jobs: TrainJobSummary[] }) {
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const preset = params.get("app") && params.get("version") ? `${params.get("app")}/${params.get("version")}` : "";
  const [choice, setChoice] = useState(preset);
  const presetTrials = (params.get("trials") ?? "").split(",").filter(Boolean).map(Number);
  const [mode, setMode] = useState<"best" | "chosen">(presetTrials.length ? "chosen" : "best");
  const [k, setK] = useState("2");
  const [chosen, setChosen] = useState<number[]>(presetTrials);
  const [isPublic, setPublic] = useState(false);
  const [logRate, setLogRate] = useState("0");
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);

  const servable = jobs.filter((job) => job.trial_counts.COMPLETED + job.trial_counts.STOPPED > 0);
  const selected = choice || (servable[0] ? `${servable[0].app}/${servable[0].app_version}` : "");
  const [app, version] = selected ? [selected.slice(0, selected.lastIndexOf("/")), Number(selected.slice(selected.lastIndexOf("/") + 1))] : ["", 0];
  const best = useLoad(
    (signal) =>
      app ? get<{ trials: Trial[] }>(`/train_jobs/${encodeURIComponent(app)}/${version}/best_trials?k=20`, signal) : Promise.resolve({ trials: [] }),
    selected,
  );

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const body: Record<string, unknown> = {
      app,
      app_version: version || null,
      public: isPublic,
      request_log_rate: typedNumber(logRate) ?? null,
    };
    if (mode === "best") body.k = k.trim() ? Number(k) : null;
    else body.trial_ids = chosen;
    setBusy(true);
    setErrors({});
    try {
      const job = await post<InferenceJob>("/inference_jobs", body);
      if (job.api_key) rememberApiKey(job.id, job.api_key);
      navigate(`/inference/${job.id}`, { state: { apiKey: job.api_key } });
    } catch (e) {
      setErrors(formErrors(e, FIELDS));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="card form" onSubmit={submit} noValidate aria-label="create an inference job">
      <h2>Serve a train job</h2>
      <div className="form-grid">
        <Field label="Train job" error={errors.app ?? errors.app_version}>
          {(props) => (
            <select {...props} value={selected} onChange={(e) => setChoice(e.target.value)}>
              {!servable.length && <option value="">no job has a trained trial yet</option>}
              {servable.map((job) => (
                <option key={job.id} value={`${job.app}/${job.app_version}`}>
                  {job.app} v{job.app_version} (best {formatScore(job.best_score)})
                </option>
              ))}
            </select>
          )}
        </Field>
        <fieldset className="radio-group">
          <legend>Members</legend>
          <label className="check">
            <input type="radio" name="mode" checked={mode === "best"} onChange={() => setMode("best")} /> the best k trials
          </label>
          <label className="check">
            <input type="radio" name="mode" checked={mode === "chosen"} onChange={() => setMode("chosen")} /> trials I choose
          </label>
        </fieldset>
        {mode === "best" && (
          <Field label="k" error={errors.k} hint="their predictions are ensembled">
            {(props) => <input {...props} type="number" min={1} value={k} onChange={(e) => setK(e.target.value)} />}
          </Field>
        )}
        <Field label="Request log rate" error={errors.request_log_rate} hint="the share of answered requests logged, 0 (none) to 1 (all)">
          {(props) => <input {...props} type="number" min={0} max={1} step={0.05} value={logRate} onChange={(e) => setLogRate(e.target.value)} />}
        </Field>
        <label className="check">
          <input type="checkbox" checked={isPublic} onChange={(e) => setPublic(e.target.checked)} /> public (no API key needed)
        </label>
      </div>
      {mode === "chosen" && (
        <fieldset className={`models-field${errors.trial_ids ? " field-invalid" : ""}`}>
          <legend>Trials (the best 20)</legend>
          {(best.data?.trials ?? []).map((trial) => (
            <label key={trial.id} className="check">
              <input
                type="checkbox"
                checked={chosen.includes(trial.id)}
                onChange={() => setChosen((ids) => (ids.includes(trial.id) ? ids.filter((id) => id !== trial.id) : [...ids, trial.id]))}
              />
              #{trial.number} {trial.model_name} <span className="muted">score {formatScore(trial.score)}</span>
            </label>
          ))}
          {errors.trial_ids && (
            <div className="field-error" role="alert">
              {errors.trial_ids}
            </div>
          )}
        </fieldset>
      )}
      <ErrorBox message={errors[FORM] ?? errors.public} />
      <button type="submit" className="primary" disabled={busy || !selected}>
        {busy ? "Creating…" : "Create inference job"}
      </button>
    </form>
  );
}

export function InferenceJobs() {
  const jobs = useLoad((signal) => get<{ inference_jobs: InferenceJob[] }>("/inference_jobs", signal), "inference");
  const trainJobs = useLoad((signal) => get<{ train_jobs: TrainJobSummary[] }>("/train_jobs", signal), "train");
  const [error, setError] = useState<string | null>(null);
  const rows = jobs.data?.inference_jobs ?? [];
  usePolling(() => jobs.reload(), 3000, rows.some((job) => job.status === "STARTING"));
  const train = useMemo(() => trainJobs.data?.train_jobs ?? [], [trainJobs.data]);

  const stop = async (job: InferenceJob) => {
    try {
      await post(`/inference_jobs/${job.id}/stop`);
      setError(null);
      await jobs.reload();
    } catch (e) {
      setError(messageOf(e));
    }
  };

  return (
    <div className="page">
      <h1>Inference jobs</h1>
      {trainJobs.data && <CreateForm jobs={train} />}
      <ErrorBox message={error ?? jobs.error ?? trainJobs.error} />
      <section className="card">
        <table className="table" aria-label="inference jobs">
          <thead>
            <tr>
              <th>#</th>
              <th>Train job</th>
              <th>Status</th>
              <th>Members</th>
              <th>Endpoint</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((job) => (
              <tr key={job.id}>
                <td>
                  <Link to={`/inference/${job.id}`}>{job.id}</Link>
                </td>
                <td>
                  <Link to={`/jobs/${encodeURIComponent(job.app)}/${job.app_version}`}>
                    {job.app} v{job.app_version}
                  </Link>
                </td>
                <td>
                  <StatusBadge status={job.status} />
                </td>
                <td>{job.members.map((m) => `#${m.trial_id} (${formatScore(m.score)})`).join(", ")}</td>
                <td>{job.predictor_url ? <code>{job.predictor_url}/predict</code> : "—"}</td>
                <td>{formatTime(job.created_at)}</td>
                <td className="actions">
                  <Link to={`/inference/${job.id}`} className="button small">
                    Playground
                  </Link>
                  {(job.status === "RUNNING" || job.status === "STARTING") && (
                    <button type="button" className="danger small" onClick={() => stop(job)}>
                      Stop
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {!rows.length && !jobs.loading && (
              <tr>
                <td colSpan={7} className="empty">
                  No inference jobs yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </section>
    </div>
  );
}
