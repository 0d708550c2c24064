import { Chart } from "../components/Chart";
import type { SubJob } from "../api/types";
import { formatScore } from "../lib/format";
import { rankingOption } from "../lib/enasRanking";

/** Each ENAS sub-job's finalists: their scores on the shared weights, and trained alone where they were. */
export function JobEnasRanking({ subJobs }: { subJobs: SubJob[] }) {
  const ranked = subJobs.filter((sub) => sub.final_ranking && sub.final_ranking.length > 0);
  if (!ranked.length) return null;
  return (
    <>
      {ranked.map((sub) => (
        <section className="card" aria-label={`ENAS ranking of ${sub.model_name}`} key={sub.id}>
          <h2>ENAS finalists: {sub.model_name}</h2>
          <Chart title="Shared weights against trained alone" built={rankingOption(sub.final_ranking ?? [])} testId="enas-ranking-chart" />
          <table data-testid="enas-ranking">
            <thead>
              <tr>
                <th>trial</th>
                <th>score on the shared weights</th>
                <th>score trained alone</th>
              </tr>
            </thead>
            <tbody>
              {(sub.final_ranking ?? []).map((entry) => (
                <tr key={entry.trial_id}>
                  <td>{entry.trial_id}</td>
                  <td>{formatScore(entry.shared_score)}</td>
                  <td>{entry.standalone_score === null ? "—" : `${formatScore(entry.standalone_score)} (trial ${entry.standalone_trial_id})`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      ))}
    </>
  );
}
