import { useMemo, useState } from "react";

import { get, messageOf } from "../api/client";
import type { InferenceStats } from "../api/types";
import { Chart } from "../components/Chart";
import { ErrorBox } from "../components/ErrorBox";
import { usePolling } from "../lib/hooks";
import { batchSizeOption, latencyOption, requestsOption } from "../lib/servingCharts";

/** How often a running job's stats are read again: its predictor adds a point every 10 s. */
export const STATS_REFRESH_MS = 10_000;

/** Requests per second, p50/p99 latency and batch size of a running inference job over the last hour. */
export function InferenceCharts({ jobId, running }: { jobId: number; running: boolean }) {
  const [stats, setStats] = useState<InferenceStats | null>(null);
  const [error, setError] = useState<string | null>(null);

  usePolling(
    async (signal) => {
      try {
        setStats(await get<InferenceStats>(`/inference_jobs/${jobId}/stats`, signal));
        setError(null);
      } catch (e) {
        if (!signal.aborted) setError(messageOf(e));
        throw e;
      }
    },
    STATS_REFRESH_MS,
    running,
  );

  const requests = useMemo(() => requestsOption(stats), [stats]);
  const latency = useMemo(() => latencyOption(stats), [stats]);
  const batchSize = useMemo(() => batchSizeOption(stats), [stats]);

  return (
    <section aria-label="serving">
      <h2>Serving, the last hour</h2>
      {running ? (
        <>
          <ErrorBox message={error} />
          <div className="charts">
            <Chart title="Requests per second" built={requests} testId="chart-requests" height={220} />
            <Chart title="Latency, p50 and p99" built={latency} testId="chart-latency" height={220} />
            <Chart title="Mean batch size" built={batchSize} testId="chart-batch-size" height={220} />
          </div>
          <p className="muted small">From the predictor's own counters, a point every {stats?.interval_s ?? 10} s; refreshed every {STATS_REFRESH_MS / 1000} s.</p>
        </>
      ) : (
        <p className="muted">The charts show while the job is RUNNING: they come from its predictor's counters.</p>
      )}
    </section>
  );
}
