import { useEffect, useRef, useState } from "react";
import type { ECharts } from "echarts/core";

import type { Built } from "../lib/charts";

/** The ECharts chunk, asked for once, when the first chart is shown: after the page's first reads have started. */
const loadECharts = (() => {
  let loading: Promise<typeof import("./echarts")> | null = null;
  return () => (loading ??= import("./echarts"));
})();

interface Props {
  title: string;
  built: Built;
  height?: number;
  /** Controls shown in the chart's header (a metric picker). */
  controls?: React.ReactNode;
  testId?: string;
}

/** An ECharts chart in a card; the header says when the data was downsampled. */
export function Chart({ title, built, height = 280, controls, testId }: Props) {
  const element = useRef<HTMLDivElement>(null);
  const chart = useRef<ECharts | null>(null);
  // Set once ECharts is loaded and the chart made, so that the option is set then.
  const [made, setMade] = useState(false);

  useEffect(() => {
    let gone = false;
    let observer: ResizeObserver | null = null;
    loadECharts().then(({ echarts }) => {
      if (gone || !element.current) return;
      const instance = echarts.init(element.current, undefined, { renderer: "canvas" });
      chart.current = instance;
      observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => instance.resize());
      observer?.observe(element.current);
      setMade(true);
    });
    return () => {
      gone = true;
      observer?.disconnect();
      chart.current?.dispose();
      chart.current = null;
    };
  }, []);

  useEffect(() => {
    chart.current?.setOption(built.option, { notMerge: true, lazyUpdate: true });
  }, [built, made]);

  const sampled = built.shown < built.total;
  return (
    <section className="card chart-card" data-testid={testId} data-shown={built.shown} data-total={built.total}>
      <header className="chart-header">
        <h3>{title}</h3>
        {sampled && (
          <span className="muted small" title="downsampled for drawing; the table holds every trial">
            {built.shown.toLocaleString()} of {built.total.toLocaleString()} shown
          </span>
        )}
        {controls}
      </header>
      <div ref={element} className="chart" style={{ height }} />
    </section>
  );
}
