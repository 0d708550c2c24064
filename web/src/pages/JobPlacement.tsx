import { Chart } from "../components/Chart";
import type { TrainJob } from "../api/types";
import { formatDuration } from "../lib/format";
import { placementOption, placementSummary } from "../lib/placement";

/** What the placement planner predicted for the job (BAOBAB_PLACEMENT other than rules), against what happened. */
export function JobPlacement({ job }: { job: TrainJob }) {
  const placement = job.placement;
  if (placement === null) return null;
  const summary = placementSummary(placement, job.finished_at);
  return (
    <section className="card" aria-label="placement">
      <h2>Placement</h2>
      <p data-testid="placement-summary">
        Planned by <strong>{placement.method}</strong>
        {summary.predicted !== null && (
          <>
            {" "}· predicted finish {new Date(summary.predicted).toLocaleString()}
            {summary.utilisation !== null && ` · slots ${Math.round(summary.utilisation * 100)}% busy`}
          </>
        )}
        {summary.error !== null &&
          ` · it ended ${formatDuration(Math.abs(summary.error))} ${summary.error >= 0 ? "before" : "after"} the last prediction`}
      </p>
      {placement.fallback !== null && (
        <p className="muted" data-testid="placement-fallback">
          {placement.fallback}
        </p>
      )}
      {placement.predictions.length > 0 && (
        <Chart title="Predicted against actual finish" built={placementOption(placement, job.finished_at)} testId="placement-chart" />
      )}
    </section>
  );
}
