"""Synthetic architecture graphs: a zoo of ResNets without building or training any.

Measuring parent selection against a thousand ResNet-sized zoo models should not take
a thousand traced modules. :func:`resnet_graph` writes, node for node, the graph that
:func:`~baobab.zoo.trace_graph` reads from a basic-block ResNet (a 3×3 stem with batch
norm and ReLU; per block two 3×3 convolutions with batch norm, a 1×1 projection with
batch norm when the shape changes, an add and a ReLU; global average pooling, a
flatten and a linear classifier); a test checks both agree. ``bench/warm_start.py``
and the tests build their zoos with :func:`synthetic_zoo`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from baobab.zoo._graph import GraphNode, ModelGraph

__all__ = ["resnet_graph", "synthetic_zoo"]

_BN_STATE = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[GraphNode] = []

    def add(
        self,
        name: str,
        op: str,
        out: tuple[int, ...],
        inputs: tuple[int, ...],
        *,
        weight: tuple[int, ...] | None = None,
        bias: tuple[int, ...] | None = None,
        path: str | None = None,
        state: Sequence[str] = (),
    ) -> int:
        owned = {local: f"{path}.{local}" for local in state} if path else {}
        self.nodes.append(GraphNode(name, op, weight, bias, owned, out, inputs))
        return len(self.nodes) - 1

    def conv_bn(self, path: str, bn_path: str, cin: int, cout: int, k: int, hw: int, sources: tuple[int, ...]) -> int:
        conv = self.add(path, "conv2d", (cout, hw, hw), sources, weight=(cout, cin, k, k), path=path, state=("weight",))
        return self.add(
            bn_path, "batchnorm2d", (cout, hw, hw), (conv,), weight=(cout,), bias=(cout,), path=bn_path, state=_BN_STATE
        )


def resnet_graph(
    blocks: Sequence[int] = (2, 2, 2, 2),
    widths: Sequence[int] = (64, 128, 256, 512),
    *,
    in_shape: tuple[int, int, int] = (3, 32, 32),
    classes: int = 10,
) -> ModelGraph:
    """The graph of a basic-block ResNet (``blocks`` per stage, ``widths`` channels; ResNet-18 by default)."""
    b = _Builder()
    channels, hw = widths[0], in_shape[1]
    last = b.conv_bn("stem.0", "stem.1", in_shape[0], channels, 3, hw, ())
    last = b.add("stem.2", "relu", (channels, hw, hw), (last,))
    index = 0
    for stage, (count, width) in enumerate(zip(blocks, widths, strict=True)):
        for block in range(count):
            stride = 2 if block == 0 and stage > 0 else 1
            out_hw = (hw - 1) // stride + 1
            p = f"layers.{index}"
            y = b.conv_bn(f"{p}.c1", f"{p}.b1", channels, width, 3, out_hw, (last,))
            y = b.add(f"{p}.relu", "relu", (width, out_hw, out_hw), (y,))
            y = b.conv_bn(f"{p}.c2", f"{p}.b2", width, width, 3, out_hw, (y,))
            if stride != 1 or channels != width:
                short = b.conv_bn(f"{p}.short.0", f"{p}.short.1", channels, width, 1, out_hw, (last,))
            else:
                short = b.add(f"{p}.short", "identity", (width, out_hw, out_hw), (last,))
            y = b.add(f"{p}.add", "add", (width, out_hw, out_hw), (y, short))
            last = b.add(f"{p}.out", "relu", (width, out_hw, out_hw), (y,))
            channels, hw, index = width, out_hw, index + 1
    last = b.add("pool", "adaptiveavgpool2d", (channels, 1, 1), (last,))
    last = b.add("flatten", "flatten", (channels,), (last,))
    b.add(
        "fc",
        "linear",
        (classes,),
        (last,),
        weight=(classes, channels),
        bias=(classes,),
        path="fc",
        state=("weight", "bias"),
    )
    return ModelGraph(nodes=tuple(b.nodes), input_shape=tuple(in_shape), output_shape=(classes,), traced=True)


def synthetic_zoo(count: int, *, seed: int = 0, distinct: bool = True) -> list[tuple[ModelGraph, float]]:
    """``count`` ResNet graphs of 1 to 3 blocks per stage and base widths 32 to 96, with made-up scores.

    Args:
        distinct: every graph a structure of its own (widths vary per stage), the hardest
            case for selection; otherwise structures repeat, as trials of one template do.
    """
    rng = np.random.default_rng(seed)
    zoo: list[tuple[ModelGraph, float]] = []
    seen: set[str] = set()
    while len(zoo) < count:
        blocks = tuple(int(n) for n in rng.integers(1, 4, size=4))
        base = int(rng.choice([32, 48, 64, 96]))
        if distinct:
            widths = tuple(int(base * 2**s + 8 * rng.integers(-2, 3)) for s in range(4))
        else:
            widths = tuple(base * 2**s for s in range(4))
        graph = resnet_graph(blocks, widths)
        if distinct and graph.fingerprint in seen:
            continue
        seen.add(graph.fingerprint)
        zoo.append((graph, float(rng.uniform(0.5, 0.95))))
    return zoo
