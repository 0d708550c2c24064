import { useState } from "react";
import { Link, useLocation, useParams } from "react-router";

import { get, messageOf, post, request } from "../api/client";
import type { InferenceJob, Prediction, TrainJob } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { Field } from "../components/Field";
import { StatusBadge } from "../components/StatusBadge";
import { formatScore, formatTime } from "../lib/format";
import { FORM, type FieldErrors, formErrors } from "../lib/forms";
import { useLoad, usePolling } from "../lib/hooks";
import { InferenceCharts } from "./InferenceCharts";
import { rememberApiKey, rememberedApiKey } from "./InferenceJobs";
import { InferenceRequestLogs } from "./InferenceRequestLogs";
import { InferenceVersions } from "./InferenceVersions";

const FIELDS = ["queries", "api_key", "file"];

/** What was typed, as the body the predictor takes: a list of queries, or an object that holds them. */
export function queriesBody(text: string): { queries: unknown } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`not valid JSON: ${messageOf(e)}`);
  }
  if (Array.isArray(value)) return { queries: value };
  if (value && typeof value === "object" && "queries" in value) return value as { queries: unknown };
  throw new Error('type a list of queries, e.g. [[5.1, 3.5, 1.4, 0.2]], or {"queries": [...]}');
}

function Playground({ job, task }: { job: InferenceJob; task: string }) {
  const location = useLocation();
  const [apiKey, setApiKey] = useState(
    () => (location.state as { apiKey?: string } | null)?.apiKey ?? rememberedApiKey(job.id),
  );
  const images = task === "IMAGE_CLASSIFICATION";
  const [mode, setMode] = useState<"json" | "image">(images ? "image" : "json");
  const [text, setText] = useState("");
  const [files, setFiles] = useState<File[]>([]);
  const [answer, setAnswer] = useState<Prediction | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    let body: unknown;
    if (mode === "json") {
      try {
        body = queriesBody(text);
      } catch (e) {
        setErrors({ queries: messageOf(e) });
        return;
      }
    } else {
      if (!files.length) {
        setErrors({ file: "choose one or more images" });
        return;
      }
      const form = new FormData();
      for (const file of files) form.append("file", file, file.name);
      body = form;
    }
    setBusy(true);
    setErrors({});
    setAnswer(null);
    try {
      if (apiKey) rememberApiKey(job.id, apiKey);
      const headers = apiKey.trim() ? { "X-Api-Key": apiKey.trim() } : undefined;
      setAnswer(await request<Prediction>("POST", `/inference_jobs/${job.id}/predict`, { body, headers }));
    } catch (e) {
      setErrors(formErrors(e, FIELDS));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card" aria-label="playground">
      <h2>Playground</h2>
      <form className="form" onSubmit={submit} noValidate>
        {!job.public && (
          <Field label="API key" error={errors.api_key} hint="shown once, when the job was created">
            {(props) => <input {...props} value={apiKey} onChange={(e) => setApiKey(e.target.value)} autoComplete="off" />}
          </Field>
        )}
        {images && (
          <div className="tabs" role="tablist">
            <button type="button" role="tab" aria-selected={mode === "image"} onClick={() => setMode("image")}>
              Image
            </button>
            <button type="button" role="tab" aria-selected={mode === "json"} onClick={() => setMode("json")}>
              JSON
            </button>
          </div>
        )}
        {mode === "json" ? (
          <Field
            label="Queries (JSON)"
            error={errors.queries}
            hint={
              images
                ? "a list of images, each rows of pixel values 0..255"
                : "a list of rows: each a list of the feature values in the training CSV's column order, or an object {column: value}"
            }
          >
            {(props) => (
              <textarea {...props} rows={6} value={text} onChange={(e) => setText(e.target.value)} placeholder="[[1.0, 2.0, 3.0]]" className="mono" />
            )}
          </Field>
        ) : (
          <Field label="Images" error={errors.file} hint="any format; each is converted to the training images' size and colours">
            {(props) => <input {...props} type="file" accept="image/*" multiple onChange={(e) => setFiles([...(e.target.files ?? [])])} />}
          </Field>
        )}
        <ErrorBox message={errors[FORM]} />
        <button type="submit" className="primary" disabled={busy || job.status !== "RUNNING"}>
          {busy ? "Predicting…" : "Predict"}
        </button>
        {job.status !== "RUNNING" && <span className="muted small"> the job answers once it is RUNNING</span>}
      </form>
      {answer && (
        <div className="predictions" aria-label="predictions">
          <h3>Predictions</h3>
          <table className="table compact">
            <thead>
              <tr>
                <th>Query</th>
                <th>Prediction</th>
              </tr>
            </thead>
            <tbody>
              {answer.predictions.map((prediction, index) => (
                <tr key={index}>
                  <td>{mode === "image" ? (files[index]?.name ?? index) : index}</td>
                  <td>
                    <code className="prediction">{JSON.stringify(prediction)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {answer.members && (
            <p className="muted small">
              {answer.version && `version ${answer.version}: `}answered by trials {answer.members.answered.map((id) => `#${id}`).join(", ") || "—"}
              {answer.members.left_out.length
                ? `; left out: ${answer.members.left_out.map((m) => `#${m.trial_id} (${m.reason})`).join(", ")}`
                : ""}
            </p>
          )}
        </div>
      )}
    </section>
  );
}

export function InferenceJobPage() {
  const params = useParams();
  const id = Number(params.id);
  const location = useLocation();
  const createdKey = (location.state as { apiKey?: string } | null)?.apiKey;
  const [job, setJob] = useState<InferenceJob | null>(null);
  const [error, setError] = useState<string | null>(null);
  const live = !job || job.status === "STARTING";
  const trainPath = job ? `/train_jobs/${encodeURIComponent(job.app)}/${job.app_version}` : "";
  const trainJob = useLoad((signal) => (trainPath ? get<TrainJob>(trainPath, signal) : Promise.resolve(null)), trainPath);

  usePolling(
    async (signal) => {
      try {
        setJob(await get<InferenceJob>(`/inference_jobs/${id}`, signal));
        setError(null);
      } catch (e) {
        if (!signal.aborted) setError(messageOf(e));
        throw e;
      }
    },
    1500,
    live,
  );

  if (!job) return <div className="page">{error ? <ErrorBox message={error} /> : <p className="muted">Loading…</p>}</div>;

  const stop = async () => {
    try {
      setJob(await post<InferenceJob>(`/inference_jobs/${job.id}/stop`));
    } catch (e) {
      setError(messageOf(e));
    }
  };

  return (
    <div className="page" data-testid="inference-page" data-status={job.status}>
      <div className="page-title">
        <h1>
          <Link to="/inference" className="muted">
            Inference
          </Link>{" "}
          / #{job.id}: {job.app} v{job.app_version}
        </h1>
        <StatusBadge status={job.status} />
        <span className="spacer" />
        {(job.status === "RUNNING" || job.status === "STARTING") && (
          <button type="button" className="danger" onClick={stop}>
            Stop
          </button>
        )}
      </div>
      <ErrorBox message={error} />
      {job.error && <ErrorBox message={`The inference job failed: ${job.error}`} />}
      {createdKey && (
        <div className="notice" role="status">
          <strong>API key:</strong> <code data-testid="api-key">{createdKey}</code>
          <div className="muted small">Copy it now: it is shown only this once. Send it as “Authorization: Bearer &lt;key&gt;”.</div>
        </div>
      )}
      <div className="summary">
        <section className="card">
          <h2>Endpoint</h2>
          {job.predictor_url ? (
            <p>
              <code data-testid="endpoint">POST {job.predictor_url}/predict</code>
            </p>
          ) : (
            <p className="muted">starting…</p>
          )}
          <p className="muted small">
            {job.public ? "public: no key needed" : "needs the API key"} · created {formatTime(job.created_at)}
          </p>
          <pre className="snippet">
            {`curl -X POST ${job.predictor_url ?? "<url>"}/predict \\\n  ${job.public ? "" : "-H 'Authorization: Bearer <api key>' "}-H 'Content-Type: application/json' \\\n  -d '{"queries": [...]}'`}
          </pre>
        </section>
        <section className="card">
          <h2>Members</h2>
          <ul className="plain">
            {job.members.map((member) => (
              <li key={member.trial_id}>
                <Link to={`/jobs/${encodeURIComponent(job.app)}/${job.app_version}/trials/${member.trial_id}`}>
                  trial {member.trial_id}
                </Link>{" "}
                {member.model_name} <span className="muted">score {formatScore(member.score)}</span>
              </li>
            ))}
          </ul>
        </section>
      </div>
      <InferenceVersions jobId={job.id} active={job.status === "RUNNING" || job.status === "STARTING"} />
      <InferenceCharts jobId={job.id} running={job.status === "RUNNING"} />
      {trainJob.data && <Playground key={trainJob.data.task} job={job} task={trainJob.data.task} />}
      <InferenceRequestLogs jobId={job.id} rate={job.request_log_rate} running={job.status === "RUNNING"} />
    </div>
  );
}
