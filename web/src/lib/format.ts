// How numbers, sizes, times and knob values are shown.

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** `1h 02m`, `3m 07s`, `4.2s`. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(rest).padStart(2, "0")}s`;
  return `${rest}s`;
}

export function formatScore(score: number | null | undefined): string {
  if (score === null || score === undefined) return "—";
  if (Math.abs(score) >= 1000 || (score !== 0 && Math.abs(score) < 0.001)) return score.toExponential(3);
  return score.toFixed(4);
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** A knob value as text: numbers trimmed, everything else as JSON. */
export function formatValue(value: unknown): string {
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) < 0.001 || Math.abs(value) >= 1e5 ? value.toExponential(2) : String(+value.toPrecision(4));
  }
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** `lr=0.01 layers=2`: knobs in one line for a table cell. */
export function formatKnobs(knobs: Record<string, unknown>): string {
  return Object.entries(knobs)
    .map(([name, value]) => `${name}=${formatValue(value)}`)
    .join(" ");
}

/** The names of the policies a trial ran with, or "none". */
export function policyLabel(policies: Record<string, boolean> | null | undefined): string {
  const on = Object.entries(policies ?? {})
    .filter(([, value]) => value)
    .map(([name]) => name)
    .sort();
  return on.length ? on.join("+") : "no policy";
}

export function parseTime(iso: string | null): number | null {
  if (!iso) return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
}
