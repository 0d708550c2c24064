import { useState } from "react";
import { Link } from "react-router";

import { get, messageOf, post } from "../api/client";
import type { SubJob, Trial, TrialPage, TrialStatus } from "../api/types";
import { TRIAL_STATUSES, isTrialOpen } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { FusedBadge } from "../components/FusedBadge";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/StatusBadge";
import { formatDuration, formatKnobs, formatScore } from "../lib/format";
import { useLoad } from "../lib/hooks";

/** The columns the API sorts by (GET .../trials?sort=), with the direction a first click asks for. */
const SORTABLE: Record<string, { key: string; first: "-" | "" }> = {
  "#": { key: "number", first: "" },
  Score: { key: "score", first: "-" },
  Duration: { key: "duration", first: "-" },
  Status: { key: "status", first: "" },
  Worker: { key: "worker", first: "" },
};

export interface TableQuery {
  page: number;
  perPage: number;
  sort: string;
  status: TrialStatus | "";
  modelId: number | null;
}

export function trialsQuery(query: TableQuery): string {
  const params = new URLSearchParams({ page: String(query.page), per_page: String(query.perPage), sort: query.sort });
  if (query.status) params.set("status", query.status);
  if (query.modelId !== null) params.set("model_id", String(query.modelId));
  return params.toString();
}

/** The next sort when a column header is clicked: its first direction, then the other way. */
export function nextSort(current: string, key: string, first: "-" | ""): string {
  if (current === `${first}${key}`) return first === "-" ? key : `-${key}`;
  return `${first}${key}`;
}

interface Props {
  app: string;
  version: number;
  subJobs: SubJob[];
  /** Changes whenever the trials changed (the page's poll), so the shown page is read again. */
  revision: number;
  selected: number[];
  onSelect: (ids: number[]) => void;
  maxSelected: number;
}

/** The job's trials, paged, sorted and filtered by the server (a job may hold many thousands). */
export function TrialsTable({ app, version, subJobs, revision, selected, onSelect, maxSelected }: Props) {
  const [query, setQuery] = useState<TableQuery>({ page: 1, perPage: 25, sort: "-score", status: "", modelId: null });
  const [error, setError] = useState<string | null>(null);
  const base = `/train_jobs/${encodeURIComponent(app)}/${version}/trials`;
  const qs = trialsQuery(query);
  const page = useLoad((signal) => get<TrialPage>(`${base}?${qs}`, signal), `${qs}#${revision}`);
  const rows: Trial[] = page.data?.trials ?? [];
  const several = subJobs.length > 1;

  const update = (change: Partial<TableQuery>) => setQuery((q) => ({ ...q, page: 1, ...change }));
  const stop = async (trial: Trial) => {
    try {
      await post(`/trials/${trial.id}/stop`);
      setError(null);
      await page.reload();
    } catch (e) {
      setError(messageOf(e));
    }
  };
  const toggle = (id: number) =>
    onSelect(selected.includes(id) ? selected.filter((other) => other !== id) : [...selected, id].slice(-maxSelected));

  const header = (label: string) => {
    const sortable = SORTABLE[label];
    if (!sortable) return <th key={label}>{label}</th>;
    const active = query.sort.replace(/^-/, "") === sortable.key;
    const descending = query.sort.startsWith("-");
    return (
      <th key={label} aria-sort={active ? (descending ? "descending" : "ascending") : "none"} className={label === "Score" || label === "Duration" ? "num" : undefined}>
        <button type="button" className="sort" onClick={() => update({ sort: nextSort(query.sort, sortable.key, sortable.first) })}>
          {label}
          <span aria-hidden="true">{active ? (descending ? " ▼" : " ▲") : ""}</span>
        </button>
      </th>
    );
  };

  return (
    <section className="card" aria-label="trials">
      <header className="table-header">
        <h2>Trials</h2>
        <label>
          Status{" "}
          <select aria-label="filter by status" value={query.status} onChange={(e) => update({ status: e.target.value as TrialStatus | "" })}>
            <option value="">all</option>
            {TRIAL_STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        {several && (
          <label>
            Model{" "}
            <select
              aria-label="filter by model"
              value={query.modelId ?? ""}
              onChange={(e) => update({ modelId: e.target.value ? Number(e.target.value) : null })}
            >
              <option value="">all</option>
              {subJobs.map((sub) => (
                <option key={sub.id} value={sub.model_id}>
                  {sub.model_name}
                </option>
              ))}
            </select>
          </label>
        )}
        <span className="muted small">{selected.length ? `${selected.length} selected for the metric chart` : "tick trials to compare their metrics"}</span>
        {page.loading && <span className="muted small">loading…</span>}
      </header>
      <ErrorBox message={error ?? page.error} />
      <div className="table-scroll">
        <table className="table trials" aria-label="trials table" aria-busy={page.loading} data-loading={page.loading}>
          <thead>
            <tr>
              <th>
                <span className="sr-only">select</span>
              </th>
              {["#", ...(several ? ["Model"] : []), "Knobs", "Policies", "Score", "Duration", "Status", "Worker", ""].map(header)}
            </tr>
          </thead>
          <tbody>
            {rows.map((trial) => (
              <tr key={trial.id} data-trial-id={trial.id}>
                <td>
                  <input
                    type="checkbox"
                    aria-label={`select trial ${trial.number}`}
                    checked={selected.includes(trial.id)}
                    onChange={() => toggle(trial.id)}
                  />
                </td>
                <td>
                  <Link to={`/jobs/${encodeURIComponent(app)}/${version}/trials/${trial.id}`}>{trial.number}</Link>
                </td>
                {several && <td>{trial.model_name}</td>}
                <td className="knobs" title={JSON.stringify(trial.knobs)}>
                  {formatKnobs(trial.knobs)}
                </td>
                <td>
                  {Object.entries(trial.policies)
                    .filter(([, on]) => on)
                    .map(([name]) => (
                      <span key={name} className="chip">
                        {name}
                      </span>
                    ))}
                </td>
                <td className="num">{formatScore(trial.score)}</td>
                <td className="num">{formatDuration(trial.duration_s)}</td>
                <td>
                  <StatusBadge status={trial.status} />
                  {trial.fused_group && (
                    <>
                      {" "}
                      <FusedBadge group={trial.fused_group} app={app} version={version} />
                    </>
                  )}
                </td>
                <td>{trial.worker ?? "—"}</td>
                <td className="actions">
                  {isTrialOpen(trial.status) && (
                    <button type="button" className="small" onClick={() => stop(trial)}>
                      Stop
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {!rows.length && !page.loading && (
              <tr>
                <td colSpan={10} className="empty">
                  {query.status ? `No ${query.status} trials.` : "No trials yet."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <Pager
        page={query.page}
        perPage={query.perPage}
        total={page.data?.total ?? 0}
        onPage={(p) => setQuery((q) => ({ ...q, page: p }))}
        onPerPage={(perPage) => update({ perPage })}
      />
    </section>
  );
}
