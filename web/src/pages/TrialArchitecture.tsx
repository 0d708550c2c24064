import { useMemo } from "react";

import type { Architecture } from "../api/types";
import { Chart } from "../components/Chart";
import { architectureHeight, architectureOption } from "../lib/architecture";

/** The architecture a SpaceModel trial trained: its graph by layers, the nodes changed from the base highlighted. */
export function TrialArchitecture({ record }: { record: Architecture }) {
  const built = useMemo(() => architectureOption(record), [record]);
  const changed = record.nodes.filter((node) => node.changed);
  const summary = changed.length
    ? `${changed.length} of ${record.nodes.length} nodes changed from the base: ${changed
        .map((node) => (node.mutator ? `${node.name} (${node.mutator})` : node.name))
        .join(", ")}`
    : `all ${record.nodes.length} nodes as in the base`;
  return (
    <Chart
      title="Architecture"
      built={built}
      height={architectureHeight(record)}
      testId="chart-architecture"
      controls={
        <span className="muted small" data-testid="architecture-summary">
          {summary}
        </span>
      }
    />
  );
}
