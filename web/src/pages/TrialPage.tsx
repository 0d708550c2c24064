import { useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";

import { download, get, messageOf, post } from "../api/client";
import type { Architecture, LogLine, MetricRow, Trial } from "../api/types";
import { isTrialOpen } from "../api/types";
import { Chart } from "../components/Chart";
import { ErrorBox } from "../components/ErrorBox";
import { FusedBadge } from "../components/FusedBadge";
import { StatusBadge } from "../components/StatusBadge";
import { trialMetricsOption } from "../lib/charts";
import { formatDuration, formatScore, formatTime, formatValue } from "../lib/format";
import { usePolling } from "../lib/hooks";
import { TrialArchitecture } from "./TrialArchitecture";
import { TrialFusionProfile } from "./TrialFusionProfile";
import { TrialLineage } from "./TrialLineage";

const POLL_MS = 2000;
/** Lines kept on the page; older ones scroll away (the API keeps them all). */
const MAX_LOG_LINES = 5000;
const LOG_PAGE = 1000;

export function TrialPage() {
  const params = useParams();
  const app = params.app ?? "";
  const version = Number(params.version);
  const trialId = Number(params.trialId);
  const [trial, setTrial] = useState<Trial | null>(null);
  const [metrics, setMetrics] = useState<MetricRow[]>([]);
  const [logs, setLogs] = useState<LogLine[]>([]);
  const [architecture, setArchitecture] = useState<Architecture | null>(null);
  const [error, setError] = useState<string | null>(null);
  const lastLog = useRef(0);
  const live = !trial || isTrialOpen(trial.status);

  usePolling(
    async (signal) => {
      try {
        const current = await get<Trial>(`/trials/${trialId}`, signal);
        const answer = await get<{ metrics: MetricRow[] }>(`/trials/${trialId}/metrics`, signal);
        // The lines since the last poll, a few pages at most (a finished trial is read once).
        for (let pages = 0; pages < MAX_LOG_LINES / LOG_PAGE; pages++) {
          const page = await get<{ logs: LogLine[] }>(
            `/trials/${trialId}/logs?after=${lastLog.current}&limit=${LOG_PAGE}`,
            signal,
          );
          if (page.logs.length) {
            lastLog.current = page.logs[page.logs.length - 1].id;
            setLogs((old) => [...old, ...page.logs].slice(-MAX_LOG_LINES));
          }
          if (page.logs.length < LOG_PAGE) break;
        }
        // Stored once, when a SpaceModel trial finishes training: read the first time it is there.
        if (current.has_architecture && !architecture) {
          setArchitecture(await get<Architecture>(`/trials/${trialId}/architecture`, signal));
        }
        setMetrics(answer.metrics);
        setTrial(current);
        setError(null);
      } catch (e) {
        if (!signal.aborted) setError(messageOf(e));
        throw e;
      }
    },
    POLL_MS,
    live,
  );

  const chart = useMemo(() => trialMetricsOption(metrics), [metrics]);

  if (!trial) {
    return <div className="page">{error ? <ErrorBox message={error} /> : <p className="muted">Loading…</p>}</div>;
  }

  const act = async (action: () => Promise<unknown>) => {
    try {
      await action();
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    }
  };
  const policies = Object.entries(trial.policies);

  return (
    <div className="page" data-testid="trial-page">
      <div className="page-title">
        <h1>
          <Link to={`/jobs/${encodeURIComponent(app)}/${version}`} className="muted">
            {app} v{version}
          </Link>{" "}
          / trial #{trial.number}
        </h1>
        <StatusBadge status={trial.status} />
        {trial.fused_group && <FusedBadge group={trial.fused_group} app={app} version={version} />}
        <span className="spacer" />
        {trial.has_params && (
          <button type="button" onClick={() => act(() => download(`/trials/${trial.id}/params`, `trial-${trial.id}.safetensors`))}>
            Download parameters
          </button>
        )}
        {isTrialOpen(trial.status) && (
          <button type="button" className="danger" onClick={() => act(() => post(`/trials/${trial.id}/stop`))}>
            Stop trial
          </button>
        )}
      </div>
      <ErrorBox message={error} />

      <div className="summary">
        <section className="card">
          <h2>Result</h2>
          <p className="big">{formatScore(trial.score)}</p>
          <dl className="facts">
            <dt>Model</dt>
            <dd>{trial.model_name}</dd>
            <dt>Duration</dt>
            <dd>{formatDuration(trial.duration_s)}</dd>
            <dt>Started</dt>
            <dd>{formatTime(trial.started_at)}</dd>
            <dt>Worker</dt>
            <dd>{trial.worker ?? "—"}</dd>
            <dt>Attempts</dt>
            <dd>{trial.attempts}</dd>
            {trial.fused_group?.members && (
              <>
                <dt>Fused with</dt>
                <dd data-testid="fused-with">
                  {trial.fused_group.members
                    .filter((member) => member.id !== trial.id)
                    .map((member) => (
                      <Link key={member.id} className="chip" to={`/jobs/${encodeURIComponent(app)}/${version}/trials/${member.id}`}>
                        #{member.number}
                      </Link>
                    ))}
                </dd>
              </>
            )}
            <dt>Warm start</dt>
            <dd data-testid="warm-start">
              {trial.parent_zoo_model_id === null
                ? "none"
                : `zoo model #${trial.parent_zoo_model_id}, similarity ${(trial.similarity ?? 0).toFixed(2)}`}
            </dd>
          </dl>
        </section>
        <section className="card">
          <h2>Knobs</h2>
          <table className="table compact" aria-label="knobs">
            <tbody>
              {Object.entries(trial.knobs).map(([name, value]) => (
                <tr key={name}>
                  <th scope="row">{name}</th>
                  <td>
                    <code>{formatValue(value)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
        <section className="card">
          <h2>Policies</h2>
          {policies.length ? (
            <ul className="plain">
              {policies.map(([name, on]) => (
                <li key={name}>
                  <span className={`chip${on ? "" : " off"}`}>{name}</span> {on ? "on" : "off"}
                </li>
              ))}
            </ul>
          ) : (
            <p className="muted">The template takes no policies.</p>
          )}
        </section>
      </div>

      {trial.lineage && <TrialLineage lineage={trial.lineage} phase={trial.phase} />}

      {trial.fusion_profile && <TrialFusionProfile profile={trial.fusion_profile} />}

      {(trial.status === "ERRORED" || trial.status === "INVALID") && (
        <section className="card" aria-label="error">
          <h2>{trial.status === "INVALID" ? "Invalid architecture" : "Error"}</h2>
          <p className="field-error">{trial.error}</p>
          {trial.traceback && <pre className="traceback">{trial.traceback}</pre>}
        </section>
      )}

      {architecture && <TrialArchitecture record={architecture} />}

      <Chart title="Interim metrics" built={chart} testId="chart-trial-metrics" />

      <section className="card" aria-label="logs">
        <h2>Logs {live && <span className="muted small">(live)</span>}</h2>
        {logs.length ? (
          <pre className="logs">
            {logs.map((log) => `${new Date(log.time).toLocaleTimeString()}  ${log.line}`).join("\n")}
          </pre>
        ) : (
          <p className="muted">No log lines.</p>
        )}
      </section>
    </div>
  );
}
