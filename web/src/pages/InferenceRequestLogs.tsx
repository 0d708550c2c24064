import { useState } from "react";

import { download, get, messageOf } from "../api/client";
import type { RequestLogDay } from "../api/types";
import { ErrorBox } from "../components/ErrorBox";
import { formatBytes } from "../lib/format";
import { useLoad, usePolling } from "../lib/hooks";

/** How often a running job's log days are listed again: its predictor writes them within 10 s. */
const LOGS_REFRESH_MS = 10_000;

/** A share as a percentage: 0.1 → "10%", 0.005 → "0.5%". */
function formatRate(rate: number): string {
  return `${+(rate * 100).toPrecision(3)}%`;
}

/** The rate at which an inference job logs requests, and its request log days with download buttons. */
export function InferenceRequestLogs({ jobId, rate, running }: { jobId: number; rate: number; running: boolean }) {
  const logs = useLoad((signal) => get<{ request_logs: RequestLogDay[] }>(`/inference_jobs/${jobId}/request_logs`, signal), String(jobId));
  const [error, setError] = useState<string | null>(null);
  usePolling(() => logs.reload(), LOGS_REFRESH_MS, running && rate > 0);
  const days = logs.data?.request_logs ?? [];

  const save = async (day: RequestLogDay) => {
    try {
      await download(`/inference_jobs/${jobId}/request_logs/${day.day}`, day.name);
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    }
  };

  return (
    <section className="card" aria-label="request logs">
      <h2>Request logs</h2>
      <p className="muted small" data-testid="request-log-rate">
        {rate > 0
          ? `The predictor logs ${formatRate(rate)} of the requests it answers (queries, predictions, latency), as JSON lines by UTC day.`
          : "This job logs no requests: set a request log rate when you create an inference job."}
      </p>
      <ErrorBox message={error ?? logs.error} />
      {days.length > 0 ? (
        <table className="table compact" aria-label="request log days">
          <thead>
            <tr>
              <th>Day (UTC)</th>
              <th>Size</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {days.map((day) => (
              <tr key={day.day}>
                <td>{day.day}</td>
                <td>{formatBytes(day.size_bytes)}</td>
                <td className="actions">
                  <button type="button" className="small" onClick={() => save(day)}>
                    Download {day.name}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        !logs.loading && rate > 0 && <p className="muted">Nothing logged yet.</p>
      )}
    </section>
  );
}
