"""Nb201Cells: NAS-Bench-201's cell space, written as a base model plus mutators.

Task IMAGE_CLASSIFICATION. Dong and Yang, "NAS-Bench-201: Extending the Scope of
Reproducible Neural Architecture Search", ICLR 2020, section 2.1. A cell is a graph
of 4 nodes: node ``j`` is the sum of an operation on each earlier node ``i``, and the
last node is the cell's output. Each of the 6 edges carries one of :data:`OPS`, the
same in every cell: 5**6 = 15,625 cells, the architectures NAS-Bench-201 trained.

The network is NAS-Bench-201's: a 3x3 convolution stem, then three stages of
``cells`` cells at ``channels``, twice and four times as many channels, with a
residual block of stride 2 between stages, then batch norm, ReLU, global average
pooling and a linear classifier. The paper's is ``channels=16, cells=5``; the default
here has one cell per stage, to train in minutes on a CPU. ``DOWNSCALE`` halves the
channels; ``SHARE_PARAMS`` starts a trial from its parent trial's weights for every
module the two architectures have in common.

The base holds a plain 3x3 convolution on every edge, a placeholder that one
:class:`OperatorMutator` per edge position replaces by the chosen operation in every
cell (``per_node=False``): six decisions ``edge_<i>_<j>``. The placeholder is a
``torch.nn`` module, not a class of its own, because torch.fx keeps only modules of
``torch.nn`` (and Baobab's inline choices) as single nodes, and traces through the
others; the mutator matches it by its name in the cell. :func:`arch_string` turns the
decisions of an instance into the string NAS-Bench-201 names its cells by.

Training is fixed (learning rate, epochs, batch size); the search is the cell's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob, PolicyKnob
from baobab.space import ModelSpace, OperatorMutator, SpaceModel
from baobab.store import read_image_files

#: The operations of an edge, in NAS-Bench-201's order.
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
#: The cell's edges (from node i to node j), in the order of NAS-Bench-201's architecture strings.
EDGES = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
#: Channels of the first stage, and cells per stage (the paper's network: 16 and 5).
CHANNELS, CELLS = 16, 1


class ReLUConvBN(nn.Sequential):
    """NAS-Bench-201's convolution: ReLU, convolution, batch norm."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        super().__init__(
            nn.ReLU(), nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(c_out)
        )


class Zero(nn.Module):
    """The ``none`` operation: the edge is absent, its node receives zeros."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


class Reduction(nn.Module):
    """The residual block between stages: half the resolution, ``c_out`` channels."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.a = ReLUConvBN(c_in, c_out, 3, stride=2)
        self.b = ReLUConvBN(c_out, c_out, 3)
        self.shortcut = nn.Sequential(nn.AvgPool2d(2, ceil_mode=True), nn.Conv2d(c_in, c_out, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x) + self.b(self.a(x))


class Cell(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        for i, j in EDGES:  # placeholders, replaced in every instance
            self.add_module(f"edge_{i}_{j}", nn.Conv2d(channels, channels, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for j in range(1, 4):
            total = getattr(self, f"edge_0_{j}")(x)
            for i in range(1, j):
                total = total + getattr(self, f"edge_{i}_{j}")(nodes[i])
            nodes.append(total)
        return nodes[3]


def make_space(*, channels: int = CHANNELS, cells: int = CELLS) -> ModelSpace:
    candidates = {
        "none": lambda conv: Zero(),
        "skip_connect": lambda conv: nn.Identity(),
        "nor_conv_1x1": lambda conv: ReLUConvBN(conv.in_channels, conv.out_channels, 1),
        "nor_conv_3x3": lambda conv: ReLUConvBN(conv.in_channels, conv.out_channels, 3),
        "avg_pool_3x3": lambda conv: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
    }
    mutators = [OperatorMutator(f"edge_{i}_{j}", f"*.edge_{i}_{j}", candidates, per_node=False) for i, j in EDGES]
    return ModelSpace(Nb201Net, mutators, args={"channels": channels, "cells": cells})


class Nb201Net(nn.Module):
    """Stem, three stages of cells with a reduction between them, and the classifier."""

    def __init__(self, in_channels: int = 3, classes: int = 10, channels: int = CHANNELS, cells: int = CELLS) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        layers: list[nn.Module] = []
        for stage in range(3):
            width = channels * 2**stage
            if stage:
                layers.append(Reduction(width // 2, width))
            layers += [Cell(width) for _ in range(cells)]
        self.cells = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.BatchNorm2d(width), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.cells(self.stem(x)))


def arch_string(choices: Mapping[str, Any]) -> str:
    """NAS-Bench-201's name of the cell of ``choices`` (an instance's ``record.choices``, or its knobs).

    Node by node, the operation on each incoming edge and the node it comes from:
    ``|nor_conv_3x3~0|+|none~0|skip_connect~1|+|...~0|...~1|...~2|``.

    Raises:
        ValueError: a decision of the cell is missing.
    """
    missing = [f"edge_{i}_{j}" for i, j in EDGES if f"edge_{i}_{j}" not in choices]
    if missing:
        raise ValueError(f"arch_string: choices lack the decision(s) {', '.join(missing)}; got {sorted(choices)}")
    return "+".join("|" + "".join(f"{choices[f'edge_{i}_{j}']}~{i}|" for i in range(j)) for j in range(1, 4))


class Nb201Cells(SpaceModel):
    @classmethod
    def space(cls) -> ModelSpace:
        return make_space()

    @staticmethod
    def training_knobs():
        return {
            "learning_rate": FixedKnob(3e-3),
            "epochs": FixedKnob(5),
            "batch_size": FixedKnob(64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
        }

    def base_args(self) -> dict[str, Any]:
        channels = CHANNELS // 2 if self.downscaled else CHANNELS
        return {"in_channels": self.input_shape[0], "classes": self.output_size, "channels": channels}

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))
