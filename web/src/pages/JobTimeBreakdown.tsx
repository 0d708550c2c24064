import { get } from "../api/client";
import type { TimeBreakdown } from "../api/types";
import { Chart } from "../components/Chart";
import { ErrorBox } from "../components/ErrorBox";
import { useLoad } from "../lib/hooks";
import { formatDuration } from "../lib/format";
import { phaseShares, shareLabel, timeBreakdownOption } from "../lib/timeBreakdown";

interface Props {
  app: string;
  version: number;
  /** What changes as trials start and end (the job's trial counts): the breakdown is read again then. */
  progress: string;
}

/** Where the job's time went: a stacked bar of its trials' seconds per phase, and a legend in seconds and percent. */
export function JobTimeBreakdown({ app, version, progress }: Props) {
  const path = `/train_jobs/${encodeURIComponent(app)}/${version}/time_breakdown`;
  const { data, error } = useLoad((signal) => get<TimeBreakdown>(path, signal), `${path}#${progress}`);
  if (error) return <ErrorBox message={error} />;
  if (data === null) return null;
  const shares = phaseShares(data);
  return (
    <section className="card" aria-label="time breakdown">
      <h2>Where the time went</h2>
      <p className="muted small" data-testid="time-total">
        {formatDuration(data.total_s)} over {data.trials} trial{data.trials === 1 ? "" : "s"}
      </p>
      <Chart title="Trial time by phase" built={timeBreakdownOption(data)} height={120} testId="time-chart" />
      <ul className="time-legend" data-testid="time-legend">
        {shares.map((share) => (
          <li key={share.phase} data-testid={`time-${share.phase}`} data-seconds={share.seconds}>
            <span className="swatch" style={{ background: share.color }} aria-hidden="true" />
            {share.label} <span className="muted">{shareLabel(share)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
