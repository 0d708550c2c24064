import { useEffect, useRef } from "react";
import { GraphChart, LineChart, ParallelChart, ScatterChart } from "echarts/charts";
import {
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  ParallelComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapComponent,
} from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";

import type { Built } from "../lib/charts";

echarts.use([
  GraphChart,
  LineChart,
  ScatterChart,
  ParallelChart,
  GridComponent,
  LegendComponent,
  TooltipComponent,
  DataZoomComponent,
  ParallelComponent,
  TitleComponent,
  VisualMapComponent,
  CanvasRenderer,
]);

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
  const chart = useRef<echarts.ECharts | null>(null);

  useEffect(() => {
    if (!element.current) return undefined;
    const instance = echarts.init(element.current, undefined, { renderer: "canvas" });
    chart.current = instance;
    const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => instance.resize());
    observer?.observe(element.current);
    return () => {
      observer?.disconnect();
      instance.dispose();
      chart.current = null;
    };
  }, []);

  useEffect(() => {
    chart.current?.setOption(built.option, { notMerge: true, lazyUpdate: true });
  }, [built]);

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
