"""Transforming a parent's weights to fit a child, given the matcher's node mapping.

For each matched node the parent's tensors are reshaped to the child's, one dimension
at a time, so that the child computes what the parent computed wherever the shapes
allow (Net2Net, Chen et al. 2016):

- **equal shapes** are copied exactly, batch-norm running statistics included;
- **wider** (more output units): the parent's units are kept and the extra ones
  replicate randomly chosen parent units, with a little noise on their incoming
  weights to break the symmetry; the layers that read them divide the replicated
  units' columns by the number of copies, so the sum they compute is unchanged;
- **narrower**: the units with the largest weight magnitude are kept, and readers
  keep the matching columns;
- **kernels**: a smaller child kernel takes the centre of the parent's, a larger one
  holds the parent's in its centre and zeros around it.

Which parent unit feeds each channel is tracked along the child's data flow (a
:class:`_UnitMap` per node: through activations, pooling, normalisation and adds
unchanged, expanded over positions by a flatten), so a layer knows how to pick its
input columns even several operations after the layer that was widened.

Layers of the child without a partner (a deeper child) that sit next to transferred
or identity layers start as the identity (a Dirac convolution, an identity matrix, a
normalisation with unit scale and zero shift) with zero bias, so the inserted block
passes its input through; other unmatched layers keep their own initialisation.
Parent layers without a partner (a shallower child) are simply not used.

Two instances of one model space pair some nodes by identity (:func:`~baobab.zoo.match_graphs`):
the same module at the same place. Those are copied exactly, whatever feeds them, as
:func:`baobab.space.inherit` copies the modules two records share, and the layers after
them read their units as the parent's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from baobab.zoo._graph import GraphNode, ModelGraph

__all__ = ["TransferReport", "transform_weights"]

DEFAULT_NOISE = 0.01
_CONV = re.compile(r"conv[123]d")
_CONV_T = re.compile(r"convtranspose[123]d")
_NORMS = re.compile(r"(batchnorm[123]d|syncbatchnorm|instancenorm[123]d|layernorm|groupnorm)")
_RESHAPES = frozenset({"flatten", "view", "reshape"})


@dataclass
class TransferReport:
    """What :func:`transform_weights` did.

    Attributes:
        exact: state entries copied unchanged.
        reshaped: state entries filled from the parent after a change of shape.
        identity: child nodes started as the identity.
        transferred_share: the share of the child's parameters (elements, not
            buffers) whose values came from the parent.
    """

    exact: list[str] = field(default_factory=list)
    reshaped: list[str] = field(default_factory=list)
    identity: list[str] = field(default_factory=list)
    transferred_share: float = 0.0

    def summary(self) -> str:
        return (
            f"{len(self.exact)} tensors copied, {len(self.reshaped)} reshaped, "
            f"{len(self.identity)} layers started as identity, "
            f"{self.transferred_share:.0%} of the parameters from the parent"
        )


@dataclass(frozen=True)
class _UnitMap:
    """For each output unit (channel or feature) of a child node, the parent unit it carries.

    ``index[k]`` is the parent unit (-1: a unit of the child's own, with no parent
    counterpart), ``scale[k]`` what a reader multiplies the parent's column by (one
    over the number of copies of a replicated unit), ``parent_size`` the parent's count.
    """

    index: np.ndarray
    scale: np.ndarray
    parent_size: int

    @classmethod
    def identity(cls, size: int) -> _UnitMap:
        return cls(np.arange(size), np.ones(size), size)

    def expanded(self, positions: int) -> _UnitMap:
        """The map over ``unit × positions`` features, as a flatten of ``(units, *positions)`` lays them out.

        It assumes the parent has as many positions per unit; a reader whose parent
        layer has another input size finds ``parent_size`` different and does not use it.
        """
        offsets = np.arange(positions)
        index = np.where(self.index[:, None] >= 0, self.index[:, None] * positions + offsets[None, :], -1)
        return _UnitMap(index.reshape(-1), np.repeat(self.scale, positions), self.parent_size * positions)


def transform_weights(
    parent_state: Mapping[str, torch.Tensor],
    parent_graph: ModelGraph,
    child_module: torch.nn.Module,
    child_graph: ModelGraph,
    mapping: Mapping[int, int],
    *,
    noise: float = DEFAULT_NOISE,
    seed: int = 0,
) -> tuple[dict[str, torch.Tensor], TransferReport]:
    """The child's state dict with the parent's weights carried over, and a report.

    Args:
        parent_state: the parent's state dict (tensors, or NumPy arrays).
        parent_graph: the parent's graph (its nodes name their state entries).
        child_module: the child; its current state fills whatever is not carried over.
        child_graph: the child's graph, traced from ``child_module``.
        mapping: child node index → parent node index (:attr:`~baobab.zoo.Match.mapping`).
        noise: standard deviation of the noise added to replicated units, relative to
            the standard deviation of the layer's weights (0: an exact copy).
        seed: seeds the choice of replicated units and the noise (never the global RNG).

    Returns:
        A complete state dict for ``child_module`` (``load_state_dict(strict=True)`` works).
    """
    # Worked on the CPU; load_state_dict copies onto the module's device.
    state = {key: value.detach().to("cpu", copy=True) for key, value in child_module.state_dict().items()}
    parent = {key: torch.as_tensor(value) for key, value in parent_state.items()}
    generator = torch.Generator().manual_seed(seed)
    widenings = _Widenings(np.random.default_rng(seed))
    report = TransferReport()
    identity = _identity_nodes(child_graph, mapping)
    maps: list[_UnitMap | None] = []
    filled = 0
    same_space = parent_graph.same_space(child_graph)
    for j, node in enumerate(child_graph.nodes):
        input_map = _input_map(child_graph, j, maps)
        i = mapping.get(j)
        if i is not None and node.weight is not None and same_space and _identical(parent_graph.nodes[i], node):
            filled += _copy_equal_state(parent_graph.nodes[i], node, parent, state, report)
            maps.append(_own_units(node))
        elif i is not None and node.weight is not None:
            grid = _grid(child_graph, j, parent_graph, i, maps)
            transfer = _Transfer(
                parent_graph.nodes[i], node, parent, state, input_map, grid, widenings, generator, noise
            )
            maps.append(transfer.run(report))
            filled += transfer.filled
        elif i is not None:
            _copy_equal_state(parent_graph.nodes[i], node, parent, state, report)
            maps.append(_passed_through(child_graph, j, input_map))
        elif j in identity:
            maps.append(_start_as_identity(node, state, input_map, report))
        elif node.weight is not None:
            maps.append(_UnitMap(np.full(_units(node), -1), np.ones(_units(node)), 0))
        else:
            maps.append(_passed_through(child_graph, j, input_map))
    total = sum(p.numel() for p in child_module.parameters())
    report.transferred_share = min(1.0, filled / total) if total else 0.0
    return state, report


class _Widenings:
    """The replication of each widening ``parent units → child units``, drawn once per transfer.

    Every layer widened from 16 to 24 units replicates the same parent units: the
    branches of a residual block are added unit by unit, so they must agree.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._drawn: dict[tuple[int, int], _UnitMap] = {}

    def get(self, parent_size: int, size: int) -> _UnitMap:
        if (parent_size, size) not in self._drawn:
            extra = self.rng.integers(0, parent_size, size - parent_size)
            index = np.concatenate([np.arange(parent_size), extra])
            counts = np.bincount(index, minlength=parent_size)
            self._drawn[(parent_size, size)] = _UnitMap(index, 1.0 / counts[index], parent_size)
        return self._drawn[(parent_size, size)]


class _Transfer:
    """Carrying one matched layer (conv, linear, norm, or anything with a weight) over."""

    def __init__(
        self,
        parent_node: GraphNode,
        node: GraphNode,
        parent: Mapping[str, torch.Tensor],
        state: dict[str, torch.Tensor],
        input_map: _UnitMap | None,
        grid: _Grid | None,
        widenings: _Widenings,
        generator: torch.Generator,
        noise: float,
    ) -> None:
        self.parent_node, self.node = parent_node, node
        self.parent, self.state = parent, state
        self.input_map, self.grid = input_map, grid
        self.widenings, self.generator, self.noise = widenings, generator, noise
        self.filled = 0

    def run(self, report: TransferReport) -> _UnitMap | None:
        op = self.node.op
        weight_key = self.node.state.get("weight")
        parent_weight = self._parent("weight")
        if weight_key is None or parent_weight is None:
            return None
        child_weight = self.state[weight_key]
        if _NORMS.fullmatch(op):
            out_map = self._unit_map_like_input(child_weight.shape[0], parent_weight.shape[0])
            for name, key in self.node.state.items():
                self._per_unit(name, key, out_map, report)
            return out_map
        dims = _unit_dims(op)
        if dims is None:
            self._overlap_all(report)
            return None
        out_dim, in_dim = dims
        if parent_weight.dim() != child_weight.dim():
            return None
        out_map = self._out_map(parent_weight, child_weight, out_dim)
        weight, counts = self._weight(parent_weight, child_weight, out_map, out_dim, in_dim)
        self._put("weight", weight, report, filled=counts)
        for name, key in self.node.state.items():
            if name != "weight":
                self._per_unit(name, key, out_map, report)
        return out_map

    # -- pieces -----------------------------------------------------------------------------

    def _parent(self, name: str) -> torch.Tensor | None:
        key = self.parent_node.state.get(name)
        return None if key is None else self.parent.get(key)

    def _put(self, name: str, value: torch.Tensor, report: TransferReport, *, filled: int | None = None) -> None:
        key = self.node.state[name]
        target = self.state[key]
        source = self._parent(name)
        value = value.to(dtype=target.dtype).reshape(target.shape).clone()
        exact = source is not None and source.shape == value.shape and torch.equal(source.to(value.dtype), value)
        self.state[key] = value
        (report.exact if exact else report.reshaped).append(key)
        if name in ("weight", "bias"):
            self.filled += value.numel() if filled is None else filled

    def _unit_map_like_input(self, size: int, parent_size: int) -> _UnitMap | None:
        if (
            self.input_map is not None
            and len(self.input_map.index) == size
            and self.input_map.parent_size == parent_size
        ):
            return self.input_map  # replicated channels stay replicated, and readers still divide by the copies
        if size == parent_size:
            return _UnitMap.identity(size)
        return None

    def _out_map(self, parent_weight: torch.Tensor, child_weight: torch.Tensor, out_dim: int) -> _UnitMap:
        parent_size, size = parent_weight.shape[out_dim], child_weight.shape[out_dim]
        if size == parent_size:
            return _UnitMap.identity(size)
        if size > parent_size:
            return self.widenings.get(parent_size, size)
        # narrower: the units of largest magnitude, in their order
        magnitude = parent_weight.detach().float().transpose(0, out_dim).reshape(parent_size, -1).abs().sum(1)
        keep = np.sort(np.argsort(-magnitude.numpy(), kind="stable")[:size])
        return _UnitMap(keep, np.ones(size), parent_size)

    def _weight(
        self, parent_weight: torch.Tensor, child_weight: torch.Tensor, out_map: _UnitMap, out_dim: int, in_dim: int
    ) -> tuple[torch.Tensor, int]:
        weight = parent_weight.detach().float()
        counts = []
        # output units
        weight = weight.index_select(out_dim, torch.from_numpy(out_map.index))
        counts.append(len(out_map.index))
        replicas = np.arange(len(out_map.index)) >= out_map.parent_size
        # input units
        child_in, parent_in = child_weight.shape[in_dim], weight.shape[in_dim]
        in_map = self.input_map
        if (
            in_map is not None
            and len(in_map.index) == child_in
            and in_map.parent_size == parent_in
            and (in_map.index >= 0).any()
        ):
            present = in_map.index >= 0
            taken = weight.index_select(in_dim, torch.from_numpy(np.where(present, in_map.index, 0)))
            scale = torch.from_numpy(np.where(present, in_map.scale, 0.0)).float()
            shape = [1] * weight.dim()
            shape[in_dim] = child_in
            weight = taken * scale.reshape(shape)
            counts.append(int(present.sum()))
        elif self.grid is not None and self.grid.fits(weight, child_weight):
            weight = self.grid.resample(weight)
            counts.append(child_in)
        else:
            weight, kept = _fit_dim(weight, in_dim, child_in, centre=False)
            counts.append(kept)
        # kernel dimensions
        for dim in range(2, weight.dim()):
            weight, kept = _fit_dim(weight, dim, child_weight.shape[dim], centre=True)
            counts.append(kept)
        if self.noise > 0 and replicas.any():
            spread = float(parent_weight.detach().float().std()) if parent_weight.numel() > 1 else 0.0
            moved = weight.movedim(out_dim, 0)
            rows = torch.from_numpy(np.flatnonzero(replicas))
            jitter = torch.randn(moved[rows].shape, generator=self.generator) * (self.noise * spread)
            moved[rows] += jitter
            weight = moved.movedim(0, out_dim)
        return weight, int(np.prod(counts))

    def _per_unit(self, name: str, key: str, out_map: _UnitMap | None, report: TransferReport) -> None:
        """A bias or a norm's per-unit entry (weight, bias, running statistics), picked with the output map."""
        source = self._parent(name)
        target = self.state[key]
        if source is None:
            return
        if source.shape == target.shape and (
            out_map is None or np.array_equal(out_map.index, np.arange(len(out_map.index)))
        ):
            self._put(name, source.detach().clone(), report)
            return
        if out_map is None or source.dim() == 0 or target.dim() == 0 or source.shape[0] != out_map.parent_size:
            value, filled = _overlap(source, target)
            self._put(name, value, report, filled=filled)
            return
        present = out_map.index >= 0
        value = target.clone().float()
        picked = source.detach().float().index_select(0, torch.from_numpy(np.where(present, out_map.index, 0)))
        if value.shape[1:] != picked.shape[1:]:
            return
        rows = torch.from_numpy(np.flatnonzero(present))
        value[rows] = picked[rows]
        self._put(name, value, report, filled=int(present.sum() * int(np.prod(value.shape[1:]))))

    def _overlap_all(self, report: TransferReport) -> None:
        for name, key in self.node.state.items():
            source = self._parent(name)
            if source is not None:
                value, filled = _overlap(source, self.state[key])
                self._put(name, value, report, filled=filled)


@dataclass(frozen=True)
class _Grid:
    """A linear layer that reads a flattened ``(channels, *positions)`` map whose size differs from the parent's.

    A deeper child pools once more, a shallower one once less: the parent's weights,
    seen as ``(outputs, channels, *positions)``, get their channels picked by the unit
    map and their positions resampled to the child's grid (area interpolation), times
    the ratio of the grid sizes, so a weight that summed over a 2×2 patch of the
    parent's map now reads the one position that patch pooled into.
    """

    parent_shape: tuple[int, ...]
    child_shape: tuple[int, ...]
    channels: _UnitMap | None

    def fits(self, weight: torch.Tensor, child_weight: torch.Tensor) -> bool:
        return (
            weight.dim() == 2
            and weight.shape[1] == int(np.prod(self.parent_shape))
            and child_weight.shape[1] == int(np.prod(self.child_shape))
            and len(self.parent_shape) == len(self.child_shape)
            and 2 <= len(self.child_shape) <= 4
        )

    def resample(self, weight: torch.Tensor) -> torch.Tensor:
        grid = weight.reshape(weight.shape[0], *self.parent_shape)
        channels = self.child_shape[0]
        units = self.channels
        if units is not None and len(units.index) == channels and units.parent_size == self.parent_shape[0]:
            present = units.index >= 0
            grid = grid.index_select(1, torch.from_numpy(np.where(present, units.index, 0)))
            scale = torch.from_numpy(np.where(present, units.scale, 0.0)).float()
            grid = grid * scale.reshape(1, -1, *([1] * (grid.dim() - 2)))
        else:
            grid, _ = _fit_dim(grid, 1, channels, centre=False)
        positions = tuple(self.child_shape[1:])
        if tuple(grid.shape[2:]) != positions:
            ratio = float(np.prod(self.parent_shape[1:])) / float(np.prod(positions))
            grid = torch.nn.functional.interpolate(grid, size=positions, mode="area") * ratio
        return grid.reshape(weight.shape[0], -1)


def _flattened(graph: ModelGraph, j: int) -> int | None:
    """The node whose output, flattened, node ``j`` reads (through dropouts and the like); None if none."""
    k = graph.nodes[j].inputs[0] if graph.nodes[j].inputs else None
    while k is not None and graph.nodes[k].weight is None:
        node = graph.nodes[k]
        if node.op in _RESHAPES:
            source = node.inputs[0] if node.inputs else None
            shape = graph.nodes[source].out_shape if source is not None else None
            return source if shape is not None and len(shape) >= 2 else None
        if node.out_shape is None or len(node.out_shape) != 1 or not node.inputs:
            return None
        k = node.inputs[0]
    return None


def _grid(child: ModelGraph, j: int, parent: ModelGraph, i: int, maps: list[_UnitMap | None]) -> _Grid | None:
    if child.nodes[j].op != "linear":
        return None
    child_source, parent_source = _flattened(child, j), _flattened(parent, i)
    if child_source is None or parent_source is None:
        return None
    child_shape, parent_shape = child.nodes[child_source].out_shape, parent.nodes[parent_source].out_shape
    assert child_shape is not None and parent_shape is not None
    return _Grid(parent_shape, child_shape, maps[child_source])


def _overlap(source: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``target`` with the block it shares with ``source`` (leading corner) copied in."""
    value = target.detach().clone()
    if source.dim() != target.dim():
        return value, 0
    block = tuple(slice(0, min(a, b)) for a, b in zip(source.shape, target.shape, strict=True))
    value[block] = source[block].to(value.dtype)
    return value, int(np.prod([b.stop for b in block])) if block else 1


def _fit_dim(tensor: torch.Tensor, dim: int, size: int, *, centre: bool) -> tuple[torch.Tensor, int]:
    """``tensor`` cut or zero-padded to ``size`` along ``dim`` (at the centre, or at the end); the kept count."""
    have = tensor.shape[dim]
    if have == size:
        return tensor, size
    if have > size:
        start = (have - size) // 2 if centre else 0
        return tensor.narrow(dim, start, size), size
    shape = list(tensor.shape)
    shape[dim] = size
    out = torch.zeros(shape, dtype=tensor.dtype)
    start = (size - have) // 2 if centre else 0
    out.narrow(dim, start, have).copy_(tensor)
    return out, have


def _copy_equal_state(
    parent_node: GraphNode,
    node: GraphNode,
    parent: Mapping[str, torch.Tensor],
    state: dict[str, torch.Tensor],
    report: TransferReport,
) -> int:
    """Every state entry of the same shape as the parent's, copied as it is: the buffers of a
    matched node without a weight (rare: a module holding only buffers), or all of a node
    paired by identity. The number of parameter elements (weight and bias) copied."""
    filled = 0
    for name, key in node.state.items():
        source_key = parent_node.state.get(name)
        source = None if source_key is None else parent.get(source_key)
        if source is not None and source.shape == state[key].shape:
            state[key] = source.detach().clone().to(dtype=state[key].dtype, device=state[key].device)
            report.exact.append(key)
            if name in ("weight", "bias"):
                filled += source.numel()
    return filled


def _identical(parent_node: GraphNode, node: GraphNode) -> bool:
    """Nodes of one space's instances that are the same module at the same place."""
    return node.identity is not None and node.identity == parent_node.identity


def _unit_dims(op: str) -> tuple[int, int] | None:
    """The dimensions of a layer's weight along its output and its input units; None for other weights."""
    if _CONV.fullmatch(op) or op == "linear":
        return 0, 1
    if _CONV_T.fullmatch(op):
        return 1, 0
    return None


def _own_units(node: GraphNode) -> _UnitMap | None:
    """The unit map of a layer copied exactly: each output unit is the parent's unit of that index."""
    assert node.weight is not None
    if _NORMS.fullmatch(node.op):
        return _UnitMap.identity(node.weight[0])
    dims = _unit_dims(node.op)
    return None if dims is None else _UnitMap.identity(node.weight[dims[0]])


def _units(node: GraphNode) -> int:
    if node.out_shape:
        return node.out_shape[0]
    return node.weight[0] if node.weight else 0


def _input_map(graph: ModelGraph, j: int, maps: list[_UnitMap | None]) -> _UnitMap | None:
    node = graph.nodes[j]
    if not node.inputs:  # reads the model's input, which parent and child share
        if graph.input_shape:
            return _UnitMap.identity(graph.input_shape[0])
        return None
    return maps[node.inputs[0]]


def _passed_through(graph: ModelGraph, j: int, input_map: _UnitMap | None) -> _UnitMap | None:
    """The unit map of an operation without weights: its input's, or its input's spread over positions."""
    node = graph.nodes[j]
    if input_map is None or not node.out_shape:
        return None
    source_shape = graph.nodes[node.inputs[0]].out_shape if node.inputs else graph.input_shape
    if not source_shape:
        return None
    positions = int(np.prod(source_shape[1:]))
    if node.op in _RESHAPES and len(node.out_shape) == 1 and node.out_shape[0] == source_shape[0] * positions:
        return input_map.expanded(positions)
    return input_map if node.out_shape[0] == source_shape[0] else None


def _neighbours(graph: ModelGraph) -> list[set[int]]:
    """For each node, the nearest nodes with weights before and after it (through operations without)."""
    successors = graph.successors()
    result: list[set[int]] = []
    for j in range(len(graph.nodes)):
        found: set[int] = set()
        for step in (lambda k: graph.nodes[k].inputs, lambda k: successors[k]):
            stack, seen = list(step(j)), set()
            while stack:
                k = stack.pop()
                if k in seen:
                    continue
                seen.add(k)
                if graph.nodes[k].weight is not None:
                    found.add(k)
                else:
                    stack.extend(step(k))
        result.append(found)
    return result


def _can_be_identity(node: GraphNode) -> bool:
    return node.weight is not None and bool(
        _NORMS.fullmatch(node.op)
        or node.op == "linear"
        or (_CONV.fullmatch(node.op) and all(k % 2 == 1 for k in node.weight[2:]))
    )


def _identity_nodes(graph: ModelGraph, mapping: Mapping[int, int]) -> set[int]:
    """Unmatched layers next to transferred ones, or to layers already chosen (so an inserted block goes whole)."""
    neighbours = _neighbours(graph)
    anchored = {j for j in mapping if graph.nodes[j].weight is not None}
    chosen: set[int] = set()
    changed = bool(anchored)
    while changed:
        changed = False
        for j, node in enumerate(graph.nodes):
            if j in mapping or j in chosen or not _can_be_identity(node):
                continue
            if neighbours[j] & (anchored | chosen):
                chosen.add(j)
                changed = True
    return chosen


def _start_as_identity(
    node: GraphNode, state: dict[str, torch.Tensor], input_map: _UnitMap | None, report: TransferReport
) -> _UnitMap | None:
    weight_key = node.state.get("weight")
    if weight_key is None:
        return None
    with torch.no_grad():
        weight = state[weight_key]
        if _NORMS.fullmatch(node.op):
            weight.fill_(1.0)
            for name, value in (("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
                if name in node.state:
                    state[node.state[name]].fill_(value)
            units = weight.shape[0]
            passed = input_map if input_map is not None and len(input_map.index) == units else None
        else:
            if node.op == "linear":
                torch.nn.init.eye_(weight)
            else:
                torch.nn.init.dirac_(weight)
            if "bias" in node.state:
                state[node.state["bias"]].zero_()
            units, inputs = weight.shape[0], weight.shape[1]
            passed = None
            if input_map is not None and len(input_map.index) == inputs:
                shared = min(units, inputs)
                index = np.full(units, -1)
                index[:shared] = input_map.index[:shared]
                scale = np.ones(units)
                scale[:shared] = input_map.scale[:shared]
                passed = _UnitMap(index, scale, input_map.parent_size)
    report.identity.append(node.name)
    return passed
