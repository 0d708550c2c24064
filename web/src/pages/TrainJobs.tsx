import { Link } from "react-router";

import { get } from "../api/client";
import type { BudgetUsed, TrainJobSummary } from "../api/types";
import { isFinished } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { StatusBadge } from "../components/StatusBadge";
import { formatDuration, formatScore, formatTime } from "../lib/format";
import { useLoad, usePolling } from "../lib/hooks";

function Meter({ value, limit }: { value: number; limit: number | null }) {
  const fraction = limit ? Math.min(1, value / limit) : null;
  return (
    <span className="meter" role="meter" aria-valuenow={value} aria-valuemin={0} aria-valuemax={limit ?? undefined}>
      <span className="meter-track">
        <span className="meter-fill" style={{ width: `${Math.round((fraction ?? 0) * 100)}%` }} />
      </span>
    </span>
  );
}

export function BudgetCell({ used }: { used: BudgetUsed }) {
  return (
    <div className="budget-cell">
      <div>
        <Meter value={used.trials} limit={used.trial_limit} /> {used.trials}
        {used.trial_limit !== null ? ` / ${used.trial_limit}` : ""} trials
      </div>
      <div>
        <Meter value={used.time_s} limit={used.time_limit_s} /> {formatDuration(used.time_s)}
        {used.time_limit_s !== null ? ` / ${formatDuration(used.time_limit_s)}` : ""}
      </div>
    </div>
  );
}

export function TrainJobs() {
  const jobs = useLoad((signal) => get<{ train_jobs: TrainJobSummary[] }>("/train_jobs", signal), "jobs");
  const rows = jobs.data?.train_jobs ?? [];
  const live = rows.some((job) => !isFinished(job.status));
  usePolling(() => jobs.reload(), 3000, live);

  return (
    <div className="page">
      <div className="page-title">
        <h1>Train jobs</h1>
        <Link to="/jobs/new" className="button primary">
          New train job
        </Link>
      </div>
      <ErrorBox message={jobs.error} />
      <section className="card">
        <table className="table" aria-label="train jobs">
          <thead>
            <tr>
              <th>App</th>
              <th>Task</th>
              <th>Status</th>
              <th>Budget used</th>
              <th className="num">Best score</th>
              <th>Models</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((job) => (
              <tr key={job.id}>
                <td>
                  <Link to={`/jobs/${encodeURIComponent(job.app)}/${job.app_version}`}>
                    {job.app} v{job.app_version}
                  </Link>
                </td>
                <td>{job.task}</td>
                <td>
                  <StatusBadge status={job.status} />
                </td>
                <td>
                  <BudgetCell used={job.budget_used} />
                </td>
                <td className="num">{formatScore(job.best_score)}</td>
                <td>{job.sub_jobs.map((sub) => sub.model_name).join(", ")}</td>
                <td>{formatTime(job.created_at)}</td>
              </tr>
            ))}
            {!rows.length && !jobs.loading && (
              <tr>
                <td colSpan={7} className="empty">
                  No train jobs yet. <Link to="/jobs/new">Create one</Link>.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </section>
    </div>
  );
}
