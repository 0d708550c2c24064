import type { FusionProfile } from "../api/types";
import { formatRate, formatRatio, fusionRows, fusionSummary, isMeasured } from "../lib/fusion";

/** What the trial measured before it trained (job option fusion "auto"): rows per second by group size, and the size chosen. */
export function TrialFusionProfile({ profile }: { profile: FusionProfile }) {
  const summary = fusionSummary(profile);
  if (!isMeasured(profile)) {
    return (
      <section className="card" aria-label="fusion profile">
        <h2>Fusion profile</h2>
        <p className="muted" data-testid="fusion-summary">
          {summary}
        </p>
      </section>
    );
  }
  const rows = fusionRows(profile);
  return (
    <section className="card" aria-label="fusion profile">
      <h2>Fusion profile</h2>
      <p data-testid="fusion-summary">{summary}</p>
      {profile.reason !== null && (
        <p data-testid="fusion-reason">
          <span className="muted">Reason:</span> {profile.reason}
        </p>
      )}
      {rows.length > 0 && (
        <table className="table compact fusion" aria-label="fusion group sizes">
          <thead>
            <tr>
              <th scope="col">Group size</th>
              <th scope="col" className="num" title="training rows per second of all members together">
                Rows/s
              </th>
              <th scope="col" className="num">
                vs. alone
              </th>
              <th scope="col">
                <span className="sr-only">Used by later trials</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.size} className={row.chosen ? "chosen" : undefined} aria-current={row.chosen ? "true" : undefined}>
                <th scope="row">{row.size === 1 ? "1 (alone)" : row.size}</th>
                <td className="num">{formatRate(row.rate)}</td>
                <td className="num">{formatRatio(row.ratio)}</td>
                <td>{row.chosen && <span className="badge badge-good">chosen</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
