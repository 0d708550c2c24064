const TONES: Record<string, string> = {
  PENDING: "neutral",
  STARTING: "neutral",
  RUNNING: "active",
  STOPPING: "warn",
  COMPLETED: "good",
  STOPPED: "warn",
  ERRORED: "bad",
  CANCELLED: "neutral",
  INVALID: "invalid",
};

// What a state means where its name alone does not say it.
const TITLES: Record<string, string> = {
  INVALID: "invalid architecture: these knob values describe a model that cannot be built",
};

export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`badge badge-${TONES[status] ?? "neutral"}`} title={TITLES[status]}>
      {status}
    </span>
  );
}
