// ECharts with the charts and components the pages use: most of the bundle, so Chart loads
// it apart (a chunk of its own), and a page's first API reads start before it is parsed.
import { BarChart, GraphChart, LineChart, ParallelChart, ScatterChart } from "echarts/charts";
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

echarts.use([
  BarChart,
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

export { echarts };
