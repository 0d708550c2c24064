import { Link } from "react-router";

import type { Ancestor, Lineage } from "../api/types";

/** "1 epoch", "3 epochs". */
function epochs(count: number): string {
  return `${count} epoch${count === 1 ? "" : "s"}`;
}

function start(lineage: Lineage): string {
  if (lineage.from === "scratch") return "trained from scratch";
  const from = lineage.from === "zoo" ? "a zoo model" : "shared parameters";
  const ancestors = `${lineage.chain.length}${lineage.truncated ? "+" : ""}`;
  return `trained from ${from}: ${epochs(lineage.inherited_epochs)} inherited along a chain of ${ancestors} ancestor${
    ancestors === "1" ? "" : "s"
  }`;
}

function AncestorLine({ ancestor }: { ancestor: Exclude<Ancestor, { hidden: true }> }) {
  const via =
    ancestor.via === "shared_params"
      ? "shared parameters"
      : `zoo model #${ancestor.zoo_model_id}${
          ancestor.similarity === null ? "" : `, similarity ${ancestor.similarity.toFixed(2)}`
        }`;
  if (ancestor.source === "upload") return <>{via}: uploaded outside a job, epochs unknown</>;
  if (ancestor.source === "removed") return <>{via}: gone since, epochs unknown</>;
  const job = `/jobs/${encodeURIComponent(ancestor.app ?? "")}/${ancestor.app_version}/trials`;
  const link = (
    <Link to={`${job}/${ancestor.trial_id}`}>
      {ancestor.app} v{ancestor.app_version} trial #{ancestor.number}
    </Link>
  );
  const phase = ancestor.phase ? ` (${ancestor.phase} phase)` : "";
  const onto = ancestor.merged_onto;
  if (ancestor.source === "merged" && onto) {
    const ontoName = `trial #${onto.number}`;
    return (
      <>
        {via}: the update of {link}
        {phase}, {epochs(ancestor.epochs ?? 0)}, added onto the shared weights{" "}
        {onto.trial_id === null ? (
          `${ontoName} left (gone since)`
        ) : (
          <>
            <Link to={`${job}/${onto.trial_id}`}>{ontoName}</Link> left
          </>
        )}
        ; it had trained from the next ancestor
      </>
    );
  }
  return (
    <>
      {link} via {via}; {epochs(ancestor.epochs ?? 0)}
      {phase}
    </>
  );
}

/** Where a trial's starting weights came from: its knobs alone no longer say how to get its model. */
export function TrialLineage({ lineage, phase }: { lineage: Lineage; phase: string | null | undefined }) {
  const summary = start(lineage);
  return (
    <section className="card" aria-label="lineage">
      <h2>Lineage</h2>
      {phase === "final" && (
        <p data-testid="final-retrain">
          <strong>Final retrain of a best configuration:</strong>{" "}
          {lineage.from === "scratch" ? "trained from scratch." : "trained from the chain below, not from scratch."}
        </p>
      )}
      <p data-testid="lineage-summary">{summary[0].toUpperCase() + summary.slice(1)}.</p>
      {lineage.chain.length > 0 && (
        <ol className="lineage" aria-label="ancestors">
          {lineage.chain.map((ancestor, i) => (
            <li key={i}>
              {"hidden" in ancestor ? (
                <span className="muted">a model you may not see (its epochs are counted)</span>
              ) : (
                <AncestorLine ancestor={ancestor} />
              )}
            </li>
          ))}
          {lineage.truncated && <li className="muted">… and more (only the nearest are listed)</li>}
        </ol>
      )}
    </section>
  );
}
