// The ECharts option that draws a SpaceModel trial's architecture: its graph laid out in layers
// from the inputs down (a topological layering, computed here so it can be tested without a
// canvas), each node labelled with its name and operator, the nodes changed from the base in a
// colour of their own. The graph sits on hidden cartesian axes (a layer per unit down, a slot per
// unit across): ECharts' own "view" placement stretches a one-column graph out of shape.

import type { Architecture, ArchitectureNode } from "../api/types";
import type { Built, ChartOption } from "./charts";

export const CHANGED = "changed from the base";
export const UNCHANGED = "as in the base";
const COLORS = { changed: "#d9822b", unchanged: "#8fa89a", edge: "#9aa5b1" };
/** Pixels per layer of the drawn chart, and its bounds: a deep network scrolls with the page. */
const ROW_PX = 52;
const MIN_HEIGHT_PX = 220;
const MAX_HEIGHT_PX = 4000;
const GRID = { top: 48, bottom: 24, left: 40, right: 40 };
const ANIMATE_UP_TO = 300;

/**
 * Each node's layer: 0 for a node without inputs, else one more than its deepest input. The
 * API sends nodes in the order the graph runs them, every input an earlier node, so one pass
 * in that order sees every input's layer before it is needed.
 */
export function layerOf(nodes: ArchitectureNode[]): Map<string, number> {
  const layers = new Map<string, number>();
  for (const node of nodes) {
    layers.set(node.name, node.inputs.length ? 1 + Math.max(...node.inputs.map((input) => layers.get(input)!)) : 0);
  }
  return layers;
}

export interface Placed {
  node: ArchitectureNode;
  layer: number;
  x: number;
  y: number;
}

/** Nodes placed top to bottom by layer (y), each layer's nodes side by side in graph order and centred (x). */
export function placeNodes(nodes: ArchitectureNode[]): Placed[] {
  const layers = layerOf(nodes);
  const rows = new Map<number, ArchitectureNode[]>();
  for (const node of nodes) {
    const layer = layers.get(node.name)!;
    if (!rows.has(layer)) rows.set(layer, []);
    rows.get(layer)!.push(node);
  }
  const placed: Placed[] = [];
  for (const [layer, row] of rows) {
    row.forEach((node, slot) => placed.push({ node, layer, x: slot - (row.length - 1) / 2, y: layer }));
  }
  return placed;
}

/** The chart's height in pixels for `record`: one band per layer, within bounds. */
export function architectureHeight(record: Architecture): number {
  const layers = layerOf(record.nodes);
  const depth = record.nodes.length ? Math.max(...layers.values()) + 1 : 0;
  return Math.min(MAX_HEIGHT_PX, Math.max(MIN_HEIGHT_PX, depth * ROW_PX + GRID.top + GRID.bottom));
}

/** Node names and operators come from the user's template; the tooltip renders HTML. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function tooltip(node: ArchitectureNode): string {
  const lines = [
    `<strong>${escapeHtml(node.name)}</strong> · ${escapeHtml(node.what)}`,
    `op: ${escapeHtml(node.op)}`,
    node.changed ? `${CHANGED}${node.mutator ? ` by mutator ${escapeHtml(node.mutator)}` : ""}` : UNCHANGED,
  ];
  return lines.join("<br/>");
}

interface NodeDatum {
  name: string;
  /** Slot across, layer down. */
  value: [number, number];
  /** 1: changed from the base (the series' categories, which the legend names). */
  category: 0 | 1;
  symbolSize: number;
  label?: { fontWeight: string };
  node: ArchitectureNode;
}

/** The graph series with computed positions: nodes by layer, edges from each input, changed nodes highlighted. */
export function architectureOption(record: Architecture): Built {
  const placed = placeNodes(record.nodes);
  const layers = new Map(placed.map((p) => [p.node.name, p.layer]));
  const data: NodeDatum[] = placed.map(({ node, x, y }) => ({
    name: node.name,
    value: [x, y],
    category: node.changed ? 1 : 0,
    node,
    symbolSize: node.changed ? 16 : 11,
    label: node.changed ? { fontWeight: "bold" } : undefined,
  }));
  const links = record.nodes.flatMap((node) =>
    node.inputs.map((input) => ({
      source: input,
      target: node.name,
      // An edge that skips layers bends, so it does not run through the nodes between.
      lineStyle: { curveness: layers.get(node.name)! - layers.get(input)! > 1 ? 0.3 : 0 },
    })),
  );
  const depth = placed.reduce((deepest, p) => Math.max(deepest, p.layer), 0);
  // Room for the widest layer, and for the labels right of its last node.
  const across = placed.reduce((widest, p) => Math.max(widest, Math.abs(p.x)), 0) + 1;
  return {
    option: {
      animation: data.length <= ANIMATE_UP_TO,
      grid: GRID,
      xAxis: { type: "value", show: false, min: -across, max: across },
      yAxis: { type: "value", show: false, inverse: true, min: -0.5, max: depth + 0.5 },
      color: [COLORS.unchanged, COLORS.changed],
      legend: { top: 4, data: [CHANGED, UNCHANGED], selectedMode: false },
      tooltip: {
        trigger: "item",
        formatter: (p: { dataType: string; data: NodeDatum & { source?: string; target?: string } }) =>
          p.dataType === "edge"
            ? `${escapeHtml(p.data.source ?? "")} → ${escapeHtml(p.data.target ?? "")}`
            : tooltip(p.data.node),
      },
      series: [
        {
          type: "graph",
          coordinateSystem: "cartesian2d",
          categories: [
            { name: UNCHANGED, itemStyle: { color: COLORS.unchanged } },
            { name: CHANGED, itemStyle: { color: COLORS.changed } },
          ],
          label: {
            show: true,
            position: "right",
            formatter: (p: { data: NodeDatum }) => `${p.data.name} · ${p.data.node.what}`,
          },
          labelLayout: { hideOverlap: true },
          edgeSymbol: ["none", "arrow"],
          edgeSymbolSize: 7,
          lineStyle: { color: COLORS.edge, width: 1.2, opacity: 0.9 },
          emphasis: { focus: "adjacency" },
          data,
          links,
        },
      ],
    } satisfies ChartOption,
    shown: data.length,
    total: data.length,
  };
}
