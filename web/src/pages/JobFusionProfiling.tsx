import type { TrainJob } from "../api/types";
import { formatTime } from "../lib/format";

const DECISIONS = { profile: "measures profiles", wait: "waits", skip: "skips profiling" } as const;

/** Under fusion "auto": whether each sub-job's trials measure fusion profiles and why, so that the
 * "fusion profiling" share of the time breakdown above has its reason beside it. */
export function JobFusionProfiling({ job }: { job: TrainJob }) {
  const entries = Object.entries(job.fusion_profiling ?? {});
  if (entries.length === 0) return null;
  return (
    <section className="card" aria-label="fusion profiling">
      <h2>Fusion profiling</h2>
      <ul className="plain">
        {entries.map(([subJobId, entry]) => (
          <li key={subJobId} data-testid={`profiling-${subJobId}`}>
            <strong>{entry.model}</strong> {DECISIONS[entry.decision]}: {entry.reason}{" "}
            <span className="muted small">({formatTime(entry.at)})</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
