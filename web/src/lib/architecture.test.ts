import { describe, expect, it } from "vitest";

import type { Architecture, ArchitectureNode } from "../api/types";
import { CHANGED, architectureHeight, architectureOption, layerOf, placeNodes } from "./architecture";

function node(name: string, inputs: string[] = [], extra: Partial<ArchitectureNode> = {}): ArchitectureNode {
  return { name, op: "call_module", what: "Linear", inputs, changed: false, mutator: null, ...extra };
}

/** x → fc1 → act → fc2, then add(act, fc2) (a skip connection) → output; act replaced by a mutator. */
const RESIDUAL: Architecture = {
  choices: { act_act: "tanh" },
  graph_key: "k",
  nodes: [
    node("x", [], { op: "placeholder", what: "x" }),
    node("fc1", ["x"]),
    node("act", ["fc1"], { what: "Tanh", changed: true, mutator: "act" }),
    node("fc2", ["act"]),
    node("add", ["act", "fc2"], { op: "call_function", what: "add" }),
    node("output", ["add"], { op: "output", what: "output" }),
  ],
};

/** A chain of `depth` nodes. */
function chain(depth: number): Architecture {
  const nodes = Array.from({ length: depth }, (_, i) => node(`n${i}`, i ? [`n${i - 1}`] : []));
  return { choices: {}, graph_key: "k", nodes };
}

describe("layerOf", () => {
  it("puts a node one layer below its deepest input", () => {
    const layers = layerOf(RESIDUAL.nodes);
    expect(Object.fromEntries(layers)).toEqual({ x: 0, fc1: 1, act: 2, fc2: 3, add: 4, output: 5 });
    for (const n of RESIDUAL.nodes) {
      for (const input of n.inputs) expect(layers.get(n.name)!).toBeGreaterThan(layers.get(input)!);
    }
  });
});

describe("placeNodes", () => {
  it("lays layers top to bottom and a layer's nodes side by side, centred", () => {
    const branches = [node("x"), node("a", ["x"]), node("b", ["x"]), node("c", ["x"]), node("sum", ["a", "b", "c"])];
    const placed = new Map(placeNodes(branches).map((p) => [p.node.name, p]));
    const [a, b, c] = ["a", "b", "c"].map((name) => placed.get(name)!);
    expect(new Set([a.y, b.y, c.y]).size).toBe(1);
    expect(a.y).toBeGreaterThan(placed.get("x")!.y);
    expect(placed.get("sum")!.y).toBeGreaterThan(a.y);
    expect(a.x).toBeLessThan(b.x);
    expect(b.x).toBeLessThan(c.x);
    expect(a.x + c.x).toBeCloseTo(0);
    expect(b.x).toBeCloseTo(placed.get("x")!.x);
  });
});

describe("architectureHeight", () => {
  it("grows with the depth, within bounds", () => {
    const shallow = architectureHeight(chain(3));
    const deeper = architectureHeight(chain(12));
    expect(deeper).toBeGreaterThan(shallow);
    expect(architectureHeight(chain(1000))).toBe(architectureHeight(chain(2000)));
  });
});

interface Datum {
  name: string;
  category: number;
  node: ArchitectureNode;
}
interface Series {
  data: Datum[];
  links: { source: string; target: string; lineStyle: { curveness: number } }[];
  categories: { name: string }[];
  label: { formatter: (p: { data: Datum }) => string };
}

describe("architectureOption", () => {
  const built = architectureOption(RESIDUAL);
  const series = (built.option.series as Series[])[0];

  it("draws every node, the changed ones in the legend's 'changed from the base' category", () => {
    expect(built.shown).toBe(RESIDUAL.nodes.length);
    const changed = series.data.filter((d) => series.categories[d.category].name === CHANGED).map((d) => d.name);
    expect(changed).toEqual(RESIDUAL.nodes.filter((n) => n.changed).map((n) => n.name));
    expect((built.option.legend as { data: string[] }).data).toContain(CHANGED);
  });

  it("draws an edge from each input, bending those that skip layers", () => {
    const edges = series.links.map((l) => `${l.source}->${l.target}`);
    expect(edges.sort()).toEqual(RESIDUAL.nodes.flatMap((n) => n.inputs.map((i) => `${i}->${n.name}`)).sort());
    const skip = series.links.find((l) => l.source === "act" && l.target === "add")!;
    const next = series.links.find((l) => l.source === "fc2" && l.target === "add")!;
    expect(skip.lineStyle.curveness).toBeGreaterThan(0);
    expect(next.lineStyle.curveness).toBe(0);
  });

  it("labels a node with its name and operator; the tooltip adds op and mutator, escaped", () => {
    const act = series.data.find((d) => d.name === "act")!;
    expect(series.label.formatter({ data: act })).toBe("act · Tanh");
    const formatter = (built.option.tooltip as { formatter: (p: unknown) => string }).formatter;
    const text = formatter({ dataType: "node", data: act });
    expect(text).toContain("op: call_module");
    expect(text).toContain(`${CHANGED} by mutator act`);
    const hostile = { ...act, node: { ...act.node, what: "<img src=x onerror=alert(1)>" } };
    expect(formatter({ dataType: "node", data: hostile })).not.toContain("<img");
  });
});
