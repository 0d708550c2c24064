"""Architecture graphs: what the zoo knows of a model without its code.

A :class:`ModelGraph` is one :class:`GraphNode` per operation, in data-flow
(topological) order, each with its type, the shapes of its weight and bias, the
state-dict entries it owns and the indices of the nodes it reads from. It is all the
matcher and the weight transfer need, and it is plain data: it travels as JSON
between a worker and the admin API, is stored in the metadata database, and can be
read without torch (the API image has none). Building one from a module is in
:mod:`baobab.zoo._trace`.

Graphs from the network are untrusted: :meth:`ModelGraph.from_json` checks every
field and names the one at fault.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GRAPH_FORMAT_VERSION", "GraphFormatError", "GraphNode", "ModelGraph"]

GRAPH_FORMAT_VERSION = 1
#: Beyond this a posted graph is refused: the largest vision models have a few thousand operations.
MAX_NODES = 50_000
_MAX_RANK = 8
_MAX_DIM = 2**31 - 1
_MAX_TEXT = 1024


class GraphFormatError(ValueError):
    """A graph's JSON breaks the format; ``field`` names the place (``graph.nodes[3].weight``)."""

    def __init__(self, message: str, *, field: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


Shape = tuple[int, ...]


@dataclass(frozen=True)
class GraphNode:
    """One operation.

    Attributes:
        name: where it comes from (the module path, or the traced function's node name).
        op: the operation's type, normalised (``conv2d`` for ``nn.Conv2d`` and
            ``F.conv2d``, ``relu`` for ``nn.ReLU``, ``F.relu`` and ``Tensor.relu_``).
        weight: the shape of its weight, None when it has none.
        bias: the shape of its bias, None when it has none.
        state: local name (``weight``, ``running_mean``...) → state-dict key, for
            every state entry it owns (parameters and buffers).
        out_shape: the shape of its output without the batch dimension, None when
            unknown (an untraced model) or not one tensor.
        inputs: indices of the nodes whose outputs it reads (all smaller than its own).
        identity: for an instance of a model space, what the node is in every instance of
            that space (:func:`baobab.space.node_identity`): equal identities hold
            interchangeable weights. None for other models.
    """

    name: str
    op: str
    weight: Shape | None = None
    bias: Shape | None = None
    state: Mapping[str, str] = field(default_factory=dict)
    out_shape: Shape | None = None
    inputs: tuple[int, ...] = ()
    identity: str | None = None

    @property
    def rank(self) -> int:
        """The weight's rank (0 without a weight): nodes match only at equal rank."""
        return 0 if self.weight is None else len(self.weight)

    @property
    def key(self) -> str:
        """Type and weight rank: two nodes may be matched only when their keys are equal."""
        return f"{self.op}/{self.rank}"

    @property
    def param_count(self) -> int:
        return _size(self.weight) + _size(self.bias)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "op": self.op,
            "weight": None if self.weight is None else list(self.weight),
            "bias": None if self.bias is None else list(self.bias),
            "state": dict(self.state),
            "out": None if self.out_shape is None else list(self.out_shape),
            "inputs": list(self.inputs),
        }
        if self.identity is not None:  # only space instances have one: other graphs read as they always did
            data["identity"] = self.identity
        return data


@dataclass(frozen=True)
class ModelGraph:
    """A model's operations in data-flow order, its input and output shapes, and how it was read.

    ``traced`` is False for a model that ``torch.fx`` could not trace: its nodes are
    then its leaf modules in registration order, chained, and ``note`` says why. The
    zoo keeps such a graph but never warm-starts from it or into it: its order is not
    the data flow, so a mapping could pair layers that do not correspond.

    ``space`` is set for an instance of a model space (:func:`baobab.space.space_key`);
    two graphs of one space pair nodes of equal identity before anything else
    (:func:`~baobab.zoo.match_graphs`).
    """

    nodes: tuple[GraphNode, ...]
    input_shape: Shape | None
    output_shape: Shape | None
    traced: bool = True
    note: str | None = None
    space: str | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def param_count(self) -> int:
        return sum(node.param_count for node in self.nodes)

    @property
    def weighted(self) -> list[int]:
        """Indices of the nodes with a weight: the model's layers."""
        return [i for i, node in enumerate(self.nodes) if node.weight is not None]

    @property
    def io_signature(self) -> str:
        """Input and output shapes as one string (``1x28x28->10``): a parent must have the child's."""
        return f"{_shape_text(self.input_shape)}->{_shape_text(self.output_shape)}"

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the structure (types, shapes, edges, I/O), not of the names nor identities.

        Similarity depends on the structure only, so graphs with one fingerprint share
        every similarity; the zoo keys its caches on it. (Identities change which nodes
        a mapping pairs, never a similarity.)
        """
        structure = [[n.op, _list(n.weight), _list(n.bias), _list(n.out_shape), list(n.inputs)] for n in self.nodes]
        text = json.dumps(
            [_list(self.input_shape), _list(self.output_shape), self.traced, structure], separators=(",", ":")
        )
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def signature(self) -> str:
        """What matching reads of each node, ``[[key, weight shape], ...]`` as JSON: a tenth of the graph's size.

        The zoo stores it beside the graph, so a parent choice reads and parses only this
        for the thousands of candidates, and the whole graph only for the one chosen.
        """
        return json.dumps([[n.key, list(n.weight or ())] for n in self.nodes], separators=(",", ":"))

    def same_space(self, other: ModelGraph) -> bool:
        """Whether both graphs are instances of one model space, so that their node identities compare."""
        return self.space is not None and self.space == other.space

    def successors(self) -> list[list[int]]:
        """For each node, the nodes that read its output."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, node in enumerate(self.nodes):
            for j in node.inputs:
                out[j].append(i)
        return out

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": GRAPH_FORMAT_VERSION,
            "traced": self.traced,
            "note": self.note,
            "input_shape": _list(self.input_shape),
            "output_shape": _list(self.output_shape),
            "nodes": [node.to_json() for node in self.nodes],
        }
        if self.space is not None:
            data["space"] = self.space
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | bytes, *, trusted: bool = False) -> ModelGraph:
        """A graph from :meth:`dumps` text.

        Args:
            trusted: the text is what :meth:`dumps` wrote after a check (the zoo's own
                table): skip the checks, which are most of the cost of reading a thousand
                graphs for a parent choice.

        Raises:
            GraphFormatError: not JSON, or not a graph.
        """
        try:
            data = json.loads(text)
        except ValueError as e:
            raise GraphFormatError(f"not JSON: {e}", field="graph") from None
        if trusted:
            return cls(
                nodes=tuple(
                    GraphNode(n["name"], n["op"], _tuple(n["weight"]), _tuple(n["bias"]), n["state"], _tuple(n["out"]),
                              tuple(n["inputs"]), n.get("identity"))
                    for n in data["nodes"]
                ),
                input_shape=_tuple(data["input_shape"]),
                output_shape=_tuple(data["output_shape"]),
                traced=data["traced"],
                note=data["note"],
                space=data.get("space"),
            )  # fmt: skip
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: Any, *, field: str = "graph") -> ModelGraph:
        """A graph from :meth:`to_json` data, every field checked.

        Raises:
            GraphFormatError: naming the first field that breaks the format.
        """
        if not isinstance(data, dict):
            raise GraphFormatError(f"must be an object, got {_kind(data)}", field=field)
        version = data.get("version")
        if version != GRAPH_FORMAT_VERSION:
            raise GraphFormatError(
                f"format version {version!r} is not {GRAPH_FORMAT_VERSION}; trace the model with this Baobab",
                field=f"{field}.version",
            )
        traced = data.get("traced")
        if not isinstance(traced, bool):
            raise GraphFormatError(f"must be true or false, got {_kind(traced)}", field=f"{field}.traced")
        note = data.get("note")
        if note is not None and not isinstance(note, str):
            raise GraphFormatError(f"must be a string or null, got {_kind(note)}", field=f"{field}.note")
        space = _optional_text(data.get("space"), f"{field}.space")
        raw_nodes = data.get("nodes")
        if not isinstance(raw_nodes, list):
            raise GraphFormatError(f"must be an array, got {_kind(raw_nodes)}", field=f"{field}.nodes")
        if len(raw_nodes) > MAX_NODES:
            raise GraphFormatError(f"has {len(raw_nodes)} nodes, at most {MAX_NODES}", field=f"{field}.nodes")
        nodes = tuple(_node(raw, i, f"{field}.nodes[{i}]") for i, raw in enumerate(raw_nodes))
        return cls(
            nodes=nodes,
            input_shape=_shape(data.get("input_shape"), f"{field}.input_shape", optional=True),
            output_shape=_shape(data.get("output_shape"), f"{field}.output_shape", optional=True),
            traced=traced,
            note=note,
            space=space,
        )


def _node(raw: Any, index: int, where: str) -> GraphNode:
    if not isinstance(raw, dict):
        raise GraphFormatError(f"must be an object, got {_kind(raw)}", field=where)
    name, op = raw.get("name"), raw.get("op")
    for key, value in (("name", name), ("op", op)):
        if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
            raise GraphFormatError(
                f"must be a non-empty string of at most {_MAX_TEXT} characters", field=f"{where}.{key}"
            )
    state = raw.get("state", {})
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(v) <= _MAX_TEXT for k, v in state.items()
    ):
        raise GraphFormatError("must be an object of local name to state-dict key (strings)", field=f"{where}.state")
    inputs = raw.get("inputs", [])
    if not isinstance(inputs, list) or not all(
        isinstance(j, int) and not isinstance(j, bool) and 0 <= j < index for j in inputs
    ):
        raise GraphFormatError(
            f"must be an array of indices of earlier nodes (0 to {index - 1}): nodes are in data-flow order",
            field=f"{where}.inputs",
        )
    return GraphNode(
        name=name,
        op=op,
        weight=_shape(raw.get("weight"), f"{where}.weight", optional=True),
        bias=_shape(raw.get("bias"), f"{where}.bias", optional=True),
        state=dict(state),
        out_shape=_shape(raw.get("out"), f"{where}.out", optional=True),
        inputs=tuple(inputs),
        identity=_optional_text(raw.get("identity"), f"{where}.identity"),
    )


def _optional_text(value: Any, where: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value or len(value) > _MAX_TEXT):
        raise GraphFormatError(f"must be a non-empty string of at most {_MAX_TEXT} characters or null", field=where)
    return value


def _shape(value: Any, where: str, *, optional: bool) -> Shape | None:
    if value is None and optional:
        return None
    if not isinstance(value, list) or len(value) > _MAX_RANK:
        raise GraphFormatError(f"must be an array of at most {_MAX_RANK} sizes or null", field=where)
    for size in value:
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= _MAX_DIM:
            raise GraphFormatError(f"sizes must be whole numbers from 0 to {_MAX_DIM}, got {size!r}", field=where)
    return tuple(value)


def _size(shape: Sequence[int] | None) -> int:
    if shape is None:
        return 0
    total = 1
    for n in shape:
        total *= n
    return total


def _tuple(shape: list[int] | None) -> Shape | None:
    return None if shape is None else tuple(shape)


def _list(shape: Shape | None) -> list[int] | None:
    return None if shape is None else list(shape)


def _shape_text(shape: Shape | None) -> str:
    return "?" if shape is None else "x".join(str(n) for n in shape) or "()"


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
