const TONES: Record<string, string> = {
  PENDING: "neutral",
  STARTING: "neutral",
  RUNNING: "active",
  STOPPING: "warn",
  COMPLETED: "good",
  STOPPED: "warn",
  ERRORED: "bad",
  CANCELLED: "neutral",
};

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge badge-${TONES[status] ?? "neutral"}`}>{status}</span>;
}
