import { useEffect, useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";

import { get, messageOf, post } from "../api/client";
import type { KnobSpec, Model, TrainJob } from "../api/types";
import { isFinished } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { ProgressBar } from "../components/ProgressBar";
import { StatusBadge } from "../components/StatusBadge";
import { formatDuration, formatScore, formatTime } from "../lib/format";
import { usePolling } from "../lib/hooks";
import { TrialFeed, loadSample, pollChanges } from "../lib/trials";
import { JobCharts } from "./JobCharts";
import { JobEnasRanking } from "./JobEnasRanking";
import { JobFusionProfiling } from "./JobFusionProfiling";
import { JobGpuShare } from "./JobGpuShare";
import { JobPlacement } from "./JobPlacement";
import { JobTimeBreakdown } from "./JobTimeBreakdown";
import { TrialsTable } from "./TrialsTable";

const POLL_MS = 2000;
const MAX_SELECTED = 8;

export function budgetBars(job: TrainJob): { label: string; fraction: number | null; detail: string }[] {
  const used = job.budget_used;
  return [
    {
      label: "Time",
      fraction: used.time_limit_s ? used.time_s / used.time_limit_s : null,
      detail:
        used.time_limit_s !== null
          ? `${formatDuration(used.time_s)} of ${formatDuration(used.time_limit_s)}`
          : `${formatDuration(used.time_s)} (no time limit)`,
    },
    {
      label: "Trials",
      fraction: used.trial_limit ? used.trials / used.trial_limit : null,
      detail: used.trial_limit !== null ? `${used.trials} of ${used.trial_limit}` : `${used.trials} (no trial limit)`,
    },
  ];
}

export function JobPage() {
  const params = useParams();
  const app = params.app ?? "";
  const version = Number(params.version);
  const [job, setJob] = useState<TrainJob | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [revision, setRevision] = useState(0);
  // The feed's revision once the first read was in: the table, read alongside it, is read again only after.
  const [firstRevision, setFirstRevision] = useState<number | null>(null);
  const [polled, setPolled] = useState(false);
  const [selected, setSelected] = useState<number[]>([]);
  const [knobConfigs, setKnobConfigs] = useState<Map<number, Record<string, KnobSpec> | null>>(new Map());
  const feed = useRef(new TrialFeed());
  // Set at the end of a poll, not when the job arrives mid-poll: that would abort the poll's own requests.
  const [done, setDone] = useState(false);

  useEffect(() => {
    feed.current = new TrialFeed();
    setJob(null);
    setPolled(false);
    setFirstRevision(null);
    setDone(false);
    setSelected([]);
  }, [app, version]);

  usePolling(
    async (signal) => {
      try {
        // Both at once; the job is shown as soon as it comes, so the table loads while the points do.
        // The first read is the server's sample of the trials, then only what changed since.
        const first = !feed.current.sampled;
        const [current] = await Promise.all([
          get<TrainJob>(`/train_jobs/${encodeURIComponent(app)}/${version}`, signal).then((answer) => {
            setJob(answer);
            return answer;
          }),
          first ? loadSample(app, version, feed.current, signal) : pollChanges(app, version, feed.current, signal),
        ]);
        // A finished job has no open trial left; one seen open was read before the job finished: read it again.
        if (isFinished(current.status) && feed.current.openIds().length) {
          await pollChanges(app, version, feed.current, signal);
        }
        setRevision(feed.current.revision);
        if (first) setFirstRevision(feed.current.revision);
        setPolled(true);
        setDone(isFinished(current.status));
        setError(null);
      } catch (e) {
        if (!signal.aborted) setError(messageOf(e));
        throw e;
      }
    },
    POLL_MS,
    !done,
  );

  const modelIds = job?.sub_jobs.map((sub) => sub.model_id).join(",") ?? "";
  useEffect(() => {
    if (!modelIds) return;
    let current = true;
    Promise.all(
      modelIds.split(",").map((id) =>
        get<Model>(`/models/${id}`)
          .then((model) => [Number(id), model.knob_config] as const)
          .catch(() => [Number(id), null] as const), // a template no longer visible: axes are guessed from the values
      ),
    ).then((configs) => current && setKnobConfigs(new Map(configs)));
    return () => {
      current = false;
    };
  }, [modelIds]);

  const points = useMemo(() => feed.current.points(), [revision, polled]);

  if (!job) {
    return (
      <div className="page">
        <h1>
          {app} v{version}
        </h1>
        {error ? <ErrorBox message={error} /> : <p className="muted">Loading…</p>}
      </div>
    );
  }

  const stop = async () => {
    if (!window.confirm(`Stop ${job.app} v${job.app_version}? Running trials get a grace period, then are cancelled.`)) return;
    try {
      setJob(await post<TrainJob>(`/train_jobs/${encodeURIComponent(app)}/${version}/stop`));
      setActionError(null);
    } catch (e) {
      setActionError(messageOf(e));
    }
  };
  const serve = `/inference?app=${encodeURIComponent(app)}&version=${version}${selected.length ? `&trials=${selected.join(",")}` : ""}`;
  const counts = Object.entries(job.trial_counts).filter(([, n]) => n > 0);

  return (
    <div className="page" data-testid="job-page" data-ready={polled} data-status={job.status}>
      <div className="page-title">
        <h1>
          <Link to="/jobs" className="muted">
            Train jobs
          </Link>{" "}
          / {job.app} v{job.app_version}
        </h1>
        <StatusBadge status={job.status} />
        <span className="spacer" />
        {(job.trial_counts.COMPLETED > 0 || job.trial_counts.STOPPED > 0) && (
          <Link to={serve} className="button">
            {selected.length ? `Serve ${selected.length} selected` : "Serve the best"}
          </Link>
        )}
        {!isFinished(job.status) && job.status !== "STOPPING" && (
          <button type="button" className="danger" onClick={stop}>
            Stop job
          </button>
        )}
      </div>
      <ErrorBox message={error} />
      <ErrorBox message={actionError} />
      {job.error && <ErrorBox message={`The job failed: ${job.error}`} />}

      <div className="summary">
        <section className="card">
          <h2>Budget used</h2>
          {budgetBars(job).map((bar) => (
            <ProgressBar key={bar.label} {...bar} />
          ))}
          <p className="muted small">
            {job.budget.GPU_COUNT ? `${job.budget.GPU_COUNT} GPU(s) at once` : "CPU slots"} · started {formatTime(job.started_at)}
            {job.finished_at ? ` · finished ${formatTime(job.finished_at)}` : ""}
            {job.seed !== null ? ` · seed ${job.seed}` : ""}
          </p>
        </section>
        <section className="card">
          <h2>Trials</h2>
          <p className="big">{formatScore(job.best_score)}</p>
          <p className="muted small">best score</p>
          <div className="counts">
            {counts.map(([state, n]) => (
              <span key={state}>
                <StatusBadge status={state} /> {n}
              </span>
            ))}
            {!counts.length && <span className="muted">none yet</span>}
          </div>
        </section>
        <section className="card">
          <h2>Models</h2>
          <ul className="plain">
            {job.sub_jobs.map((sub) => (
              <li key={sub.id}>
                {sub.model_name} <span className="muted small">({sub.strategy})</span> <StatusBadge status={sub.status} />
                {sub.error && <div className="field-error">{sub.error}</div>}
              </li>
            ))}
          </ul>
          <p className="muted small">
            {job.task} · train dataset #{job.train_dataset_id} · validation #{job.val_dataset_id}
            {job.target ? ` · target ${job.target}` : ""}
            {Object.keys(job.train_args).length ? ` · train args ${JSON.stringify(job.train_args)}` : ""}
            {job.options && Object.keys(job.options).length ? ` · options ${JSON.stringify(job.options)}` : ""}
          </p>
        </section>
      </div>

      <JobTimeBreakdown app={job.app} version={job.app_version} progress={JSON.stringify(job.trial_counts)} />

      <JobFusionProfiling job={job} />

      <JobGpuShare job={job} />

      <JobPlacement job={job} />

      <JobEnasRanking subJobs={job.sub_jobs} />

      <JobCharts
        points={points}
        omitted={feed.current.omitted}
        revision={revision}
        selected={selected}
        subJobs={job.sub_jobs}
        knobConfigs={knobConfigs}
      />

      <TrialsTable
        app={app}
        version={version}
        subJobs={job.sub_jobs}
        revision={revision - (firstRevision ?? revision)}
        selected={selected}
        onSelect={setSelected}
        maxSelected={MAX_SELECTED}
      />
    </div>
  );
}
