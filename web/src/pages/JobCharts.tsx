import { useEffect, useMemo, useState } from "react";

import { get } from "../api/client";
import type { KnobSpec, MetricRow, SubJob, TrialPoint } from "../api/types";
import { isTrialOpen } from "../api/types";
import { Chart } from "../components/Chart";
import {
  PARALLEL_LINES,
  SCATTER_POINTS,
  bestScoreOption,
  metricCurvesOption,
  metricNames,
  parallelOption,
  scoreScatterOption,
} from "../lib/charts";

interface Props {
  points: TrialPoint[];
  /** Per template id: scored trials not in `points` (left out by the server's sample). */
  omitted: ReadonlyMap<number, number>;
  revision: number;
  /** Trials ticked in the table; the best three when none are. */
  selected: number[];
  subJobs: SubJob[];
  knobConfigs: Map<number, Record<string, KnobSpec> | null>;
}

/** The metric most worth showing first: an accuracy or score, else a loss, else the first name. */
export function preferredMetric(names: string[]): string | null {
  return (
    names.find((n) => /acc|score|auc|f1/i.test(n)) ?? names.find((n) => /loss/i.test(n)) ?? names[0] ?? null
  );
}

export function defaultSelection(points: TrialPoint[], n = 3): number[] {
  return points
    .filter((p) => p.score !== null)
    .sort((a, b) => b.score! - a.score! || a.id - b.id)
    .slice(0, n)
    .map((p) => p.id);
}

export function JobCharts({ points, omitted, revision, selected, subJobs, knobConfigs }: Props) {
  const compared = useMemo(() => (selected.length ? selected : defaultSelection(points)), [selected, points]);
  const [metrics, setMetrics] = useState<Map<number, MetricRow[]>>(new Map());
  const [metric, setMetric] = useState<string | null>(null);
  const [modelId, setModelId] = useState<number | null>(null);
  const byId = useMemo(() => new Map(points.map((p) => [p.id, p])), [points]);

  // Metrics of the compared trials; those still running are read again when the trials change.
  useEffect(() => {
    const controller = new AbortController();
    const wanted = compared.filter((id) => !metrics.has(id) || isTrialOpen(byId.get(id)?.status ?? "COMPLETED"));
    Promise.all(
      wanted.map((id) =>
        get<{ metrics: MetricRow[] }>(`/trials/${id}/metrics`, controller.signal)
          .then((answer) => [id, answer.metrics] as const)
          .catch(() => [id, [] as MetricRow[]] as const),
      ),
    ).then((loaded) => {
      if (controller.signal.aborted) return;
      setMetrics((old) => {
        const next = new Map<number, MetricRow[]>();
        for (const id of compared) {
          const fresh = loaded.find(([loadedId]) => loadedId === id);
          next.set(id, fresh ? fresh[1] : (old.get(id) ?? []));
        }
        return next;
      });
    });
    return () => controller.abort();
  }, [compared.join(","), revision]);

  const names = useMemo(() => metricNames(metrics), [metrics]);
  const shownMetric = metric && names.includes(metric) ? metric : preferredMetric(names);
  // A ticked trial the sample left out is named by its id: its number is not at hand.
  const labels = useMemo(
    () => new Map(compared.map((id) => [id, byId.has(id) ? `#${byId.get(id)!.number}` : `trial id ${id}`])),
    [compared, byId],
  );
  const model = modelId ?? subJobs[0]?.model_id ?? null;
  const modelPoints = useMemo(() => points.filter((p) => p.model_id === model), [points, model]);

  const best = useMemo(() => bestScoreOption(points), [points]);
  const omittedAll = [...omitted.values()].reduce((a, b) => a + b, 0);
  const scatter = useMemo(() => scoreScatterOption(points, SCATTER_POINTS, omittedAll), [points, omittedAll]);
  const curves = useMemo(() => metricCurvesOption(metrics, shownMetric, labels), [metrics, shownMetric, labels]);
  const parallel = useMemo(
    () =>
      parallelOption(
        modelPoints,
        model !== null ? (knobConfigs.get(model) ?? null) : null,
        PARALLEL_LINES,
        model !== null ? (omitted.get(model) ?? 0) : 0,
      ),
    [modelPoints, model, knobConfigs, omitted],
  );

  return (
    <div className="charts">
      <Chart title="Best score over time" built={best} testId="chart-best" />
      <Chart title="Score of every trial, by policy" built={scatter} testId="chart-scores" />
      <Chart
        title={`Interim metrics of ${selected.length ? "the selected" : "the best"} trials`}
        built={curves}
        testId="chart-metrics"
        controls={
          names.length > 1 && (
            <select aria-label="metric" value={shownMetric ?? ""} onChange={(e) => setMetric(e.target.value)}>
              {names.map((n) => (
                <option key={n}>{n}</option>
              ))}
            </select>
          )
        }
      />
      <Chart
        title="Knobs against score"
        built={parallel}
        testId="chart-parallel"
        controls={
          subJobs.length > 1 && (
            <select aria-label="model for the knob chart" value={model ?? ""} onChange={(e) => setModelId(Number(e.target.value))}>
              {subJobs.map((sub) => (
                <option key={sub.id} value={sub.model_id}>
                  {sub.model_name}
                </option>
              ))}
            </select>
          )
        }
      />
    </div>
  );
}
