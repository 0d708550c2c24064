interface Props {
  label: string;
  /** 0..1, or null when there is no limit to measure against. */
  fraction: number | null;
  detail: string;
}

/** A labelled progress bar (role progressbar, so screen readers and tests read its value). */
export function ProgressBar({ label, fraction, detail }: Props) {
  const percent = fraction === null ? null : Math.round(Math.min(1, Math.max(0, fraction)) * 100);
  return (
    <div className="progress">
      <div className="progress-label">
        <span>{label}</span>
        <span className="muted">{detail}</span>
      </div>
      <div
        className="progress-track"
        role="progressbar"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent ?? undefined}
        aria-valuetext={detail}
      >
        <div className="progress-fill" style={{ width: `${percent ?? 0}%` }} />
      </div>
    </div>
  );
}
