"""Mutation records: what an instance of a space is, node by node, and what it shares.

Every node gets two keys. The *operator key* says what the node computes on its own (a
module's type, configuration and tensor shapes; a function and its constant arguments):
two nodes with the same operator key hold interchangeable weights, which is what weight
inheritance and the zoo need. The *structure key* adds everything upstream of the node:
two instances whose outputs have the same structure key are the same graph, which is
what grouping same-shaped trials needs. Keys are digests, so records of different
processes compare.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import fx, nn

if TYPE_CHECKING:
    from baobab.space._space import ModelSpace

__all__ = ["MutationRecord", "NodeInfo", "node_identity", "node_keys", "space_key"]


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:24]


def _constant(value: Any) -> str:
    """A node argument as text, with nodes reduced to a placeholder (their keys count elsewhere)."""
    return repr(fx.node.map_arg(value, lambda _: "<node>"))


def _tensor_shapes(module: nn.Module) -> str:
    return ";".join(f"{name}:{tuple(t.shape)}:{t.dtype}" for name, t in module.state_dict().items())


def _what(node: fx.Node, graph_module: fx.GraphModule) -> str:
    """The node's operator in a word: a module class, a function or a method name."""
    if node.op == "call_module":
        return type(graph_module.get_submodule(str(node.target))).__name__
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return str(node.target)


def operator_key(node: fx.Node, graph_module: fx.GraphModule) -> str:
    if node.op == "call_module":
        module = graph_module.get_submodule(str(node.target))
        cls = type(module)
        return _digest("module", f"{cls.__module__}.{cls.__qualname__}", repr(module), _tensor_shapes(module))
    if node.op == "get_attr":
        value: Any = graph_module
        for part in str(node.target).split("."):
            value = getattr(value, part)
        return _digest("attr", node.target, tuple(value.shape) if isinstance(value, torch.Tensor) else repr(value))
    if node.op == "call_function":
        target = node.target
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', target)}"
        return _digest("function", name, _constant(node.args), _constant(node.kwargs))
    return _digest(node.op, node.target, _constant(node.args), _constant(node.kwargs))


def node_identity(node: fx.Node, graph_module: fx.GraphModule) -> str:
    """What ``node`` is across instances of one space: its operator key, and for a module or an
    attribute its path too.

    Instances share a module by path and key (:meth:`MutationRecord.shared_modules`), so two
    layers of equal shape at different places stay apart; a function call has no path that
    survives re-tracing, so its key alone says what it is.
    """
    key = operator_key(node, graph_module)
    return _digest(node.target, key) if node.op in ("call_module", "get_attr") else key


def space_key(space: ModelSpace) -> str:
    """Which space an instance comes from: its base's name and every decision with its candidates.

    Records of equal space keys compare node by node. The base's module is left out: a template
    is imported under a name made of its file's checksum, so every version of a template would
    be a space of its own, while operator keys already tell the nodes that changed.
    """
    base = getattr(space.base, "__qualname__", type(space.base).__qualname__)
    decisions = sorted(space.decisions().items(), key=lambda item: item[0])
    return _digest("space", base, *(f"{name}={knob.values!r}" for name, knob in decisions))


@dataclass(frozen=True)
class NodeInfo:
    """One node of an instance, enough to draw the graph: its operator, inputs, and whether it
    differs from the base."""

    name: str
    op: str
    what: str
    inputs: tuple[str, ...]
    changed: bool
    mutator: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "what": self.what,
            "inputs": list(self.inputs),
            "changed": self.changed,
            "mutator": self.mutator,
        }


def node_keys(graph_module: fx.GraphModule) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each node's operator key and input names: what "unchanged from the base" compares."""
    return {
        n.name: (operator_key(n, graph_module), tuple(i.name for i in n.all_input_nodes))
        for n in graph_module.graph.nodes
    }


@dataclass(frozen=True)
class MutationRecord:
    """What an instance is: the decisions that shaped it and, per node, what it shares.

    ``choices`` holds only the decisions that were active (a decision whose condition did not
    hold, or whose node this instance does not have, is left out), so two choices that differ
    only in decisions without effect give equal records.
    """

    choices: Mapping[str, Any]
    nodes: tuple[NodeInfo, ...]
    operators: Mapping[str, str]
    structure: Mapping[str, str]
    modules: Mapping[str, str]
    graph_key: str

    @classmethod
    def of(
        cls,
        graph_module: fx.GraphModule,
        base: Mapping[str, tuple[str, tuple[str, ...]]],
        choices: Mapping[str, Any],
        touched: Mapping[str, str],
    ) -> MutationRecord:
        """The record of ``graph_module``, compared with the base's :func:`node_keys`."""
        operators: dict[str, str] = {}
        structure: dict[str, str] = {}
        modules: dict[str, str] = {}
        nodes: list[NodeInfo] = []
        for node in graph_module.graph.nodes:
            key = operator_key(node, graph_module)
            inputs = tuple(i.name for i in node.all_input_nodes)
            operators[node.name] = key
            structure[node.name] = _digest(
                key, _constant(node.args), _constant(node.kwargs), *(structure[i] for i in inputs)
            )
            if node.op == "call_module":
                modules[str(node.target)] = key
            changed = base.get(node.name) != (key, inputs) or node.name in touched
            nodes.append(
                NodeInfo(node.name, node.op, _what(node, graph_module), inputs, changed, touched.get(node.name))
            )
        output = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
        return cls(dict(choices), tuple(nodes), operators, structure, modules, structure[output.name])

    @property
    def changed(self) -> frozenset[str]:
        """The nodes that differ from the base: replaced, inserted or fed differently."""
        return frozenset(n.name for n in self.nodes if n.changed)

    def same_graph(self, other: MutationRecord) -> bool:
        """True when both instances compute the same graph (they may be trained together)."""
        return self.graph_key == other.graph_key

    def shared_modules(self, other: MutationRecord) -> frozenset[str]:
        """Module paths whose operator is the same in both instances: their weights are interchangeable."""
        return frozenset(t for t, key in self.modules.items() if other.modules.get(t) == key)

    def to_json(self) -> dict[str, Any]:
        return {"choices": dict(self.choices), "graph_key": self.graph_key, "nodes": [n.to_json() for n in self.nodes]}
