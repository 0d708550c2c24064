import type { TrainJob } from "../api/types";

/** Under resources.gpu_share "auto": how many of the job's trials share each GPU, each change with its reason,
 * and the trials that ran out of GPU memory beside others and ran again alone. */
export function JobGpuShare({ job }: { job: TrainJob }) {
  const share = job.gpu_share;
  if (!share) return null;
  const device = share.device_mb ? ` of ${share.device_mb.toLocaleString("en")} MiB` : "";
  return (
    <section className="card" aria-label="GPU sharing">
      <h2>GPU sharing</h2>
      <p data-testid="gpu-share-level">
        {share.level} trial{share.level === 1 ? "" : "s"} per GPU{share.settled ? " (settled)" : " (measuring)"}; the
        largest trial needed {share.peak_mb.toLocaleString("en")} MiB{device}.
      </p>
      <ol className="plain">
        {share.changes.map((change, i) => (
          <li key={i} data-testid={`gpu-share-change-${i}`}>
            {change.level} per GPU: {change.reason}
          </li>
        ))}
      </ol>
      {share.retried_alone.length > 0 && (
        <p data-testid="gpu-share-retried">
          Ran out of GPU memory beside others, and ran again alone: trial{share.retried_alone.length === 1 ? "" : "s"}{" "}
          {share.retried_alone.join(", ")}.
        </p>
      )}
    </section>
  );
}
