"""DartsCell: a DARTS cell search space on a network of two cells, a normal one and a reduction one.

Task IMAGE_CLASSIFICATION; any strategy searches it. A cell has two inputs (the outputs
of the two cells before it, or of the stem) and :data:`NODES` intermediate nodes; each
node is the sum of two inputs, each chosen among the cell's inputs and earlier nodes (an
:class:`~baobab.space.InputChoice`) and passed through an operation of :data:`OPS` (a
:class:`~baobab.space.LayerChoice`); the cell's output concatenates its nodes. Each cell
has its own decisions, as DARTS has a normal and a reduction genotype:
``<cell>_node<k>_in<a>`` (values name the inputs: ``normal_states_in1``,
``normal_states_node0``, ...) and ``<cell>_node<k>_op<a>`` for input ``a`` of node ``k``.

Liu, Simonyan and Yang, "DARTS: Differentiable Architecture Search", ICLR 2019: the same
operations (without ``none``, which a discrete architecture never keeps), cells and
concatenation; the network is two cells instead of twenty, on a stem that halves images
of 16 pixels and more. One departure keeps every architecture valid: a reduction cell
halves its two inputs as it prepares them (a strided 1x1 convolution) and runs every
operation at stride 1, where DARTS gives the operations on the cell's inputs stride 2;
so any input may feed any operation. ``DOWNSCALE`` halves the channels; ``SHARE_PARAMS``
starts a trial from its parent trial's weights for every module the two architectures
have in common.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob, FloatKnob, PolicyKnob
from baobab.space import InputChoice, LayerChoice, ModelSpace, SpaceModel
from baobab.store import read_image_files

#: The operations on a node's input (the first is the base's).
OPS = ("sep_conv_3x3", "sep_conv_5x5", "dil_conv_3x3", "max_pool_3x3", "avg_pool_3x3", "skip_connect")
#: Intermediate nodes of a cell.
NODES = 4
#: Channels of a node in the normal cell (twice as many in the reduction cell; half under DOWNSCALE).
CHANNELS = 8


def separable(channels: int, kernel: int, *, dilation: int = 1) -> list[nn.Module]:
    """ReLU, a depthwise convolution, a pointwise one and batch norm: DARTS's unit of its separable convolutions."""
    return [
        nn.ReLU(),
        nn.Conv2d(channels, channels, kernel, padding=dilation * (kernel // 2), dilation=dilation, groups=channels,
                  bias=False),
        nn.Conv2d(channels, channels, 1, bias=False),
        nn.BatchNorm2d(channels),
    ]  # fmt: skip


def operation(name: str, channels: int) -> nn.Module:
    """One of :data:`OPS` at stride 1, as DARTS builds it."""
    if name.startswith("sep_conv"):  # applied twice
        kernel = int(name[-1])
        return nn.Sequential(*separable(channels, kernel), *separable(channels, kernel))
    if name == "dil_conv_3x3":
        return nn.Sequential(*separable(channels, 3, dilation=2))
    if name == "max_pool_3x3":
        return nn.MaxPool2d(3, stride=1, padding=1)
    if name == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    return nn.Identity()


def prepare(in_channels: int, channels: int, stride: int) -> nn.Sequential:
    """A cell input brought to the cell's channels (halved in a reduction cell): ReLU, 1x1 convolution, batch norm."""
    return nn.Sequential(nn.ReLU(), nn.Conv2d(in_channels, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))


class Node(nn.Module):
    """An intermediate node: per input, which earlier state, and which operation on it."""

    def __init__(self, label: str, index: int, channels: int) -> None:
        super().__init__()
        candidates = 2 + index  # the cell's two inputs and the nodes before this one
        self.inputs = nn.ModuleList(InputChoice(candidates, label=f"{label}_in{a}") for a in range(2))
        self.ops = nn.ModuleList(
            LayerChoice({name: operation(name, channels) for name in OPS}, label=f"{label}_op{a}") for a in range(2)
        )


class Cell(nn.Module):
    """``NODES`` nodes, each the sum of two chosen inputs through chosen operations; the output concatenates them."""

    def __init__(self, label: str, in_channels: tuple[int, int], channels: int, *, reduction: bool) -> None:
        super().__init__()
        self.prepare = nn.ModuleList(prepare(c, channels, 2 if reduction else 1) for c in in_channels)
        self.nodes = nn.ModuleList(Node(f"{label}_node{k}", k, channels) for k in range(NODES))
        # nn.Identity stays a node of its own, so the candidates of an input choice read
        # ``normal_states_node0`` rather than torch.fx's numbered names.
        names = ("in0", "in1", *(f"node{k}" for k in range(NODES)))
        self.states = nn.ModuleDict({name: nn.Identity() for name in names})
        self.out_channels = NODES * channels

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
        states = [self.states.in0(self.prepare[0](s0)), self.states.in1(self.prepare[1](s1))]
        for k, node in enumerate(self.nodes):
            # Input i's candidates start at the cell's input i: by default a node sums both cell inputs.
            a, b = (node.ops[i](node.inputs[i](states[i:] + states[:i])) for i in range(2))
            states.append(self.states[f"node{k}"](a + b))
        return torch.cat(states[2:], dim=1)


class DartsNet(nn.Module):
    """The base: a stem, a normal cell, a reduction cell (twice the channels), global pooling, a linear classifier."""

    def __init__(
        self, *, in_channels: int = 1, height: int = 28, width: int = 28, classes: int = 10, channels: int = CHANNELS
    ) -> None:
        super().__init__()
        stem = 3 * channels  # DARTS's stem multiplier
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, stem, 3, padding=1, bias=False),
            nn.BatchNorm2d(stem),
            nn.MaxPool2d(2) if min(height, width) >= 16 else nn.Identity(),  # a quarter of the work, little lost
        )
        self.normal = Cell("normal", (stem, stem), channels, reduction=False)
        self.reduce = Cell("reduce", (stem, self.normal.out_channels), 2 * channels, reduction=True)
        self.head = nn.Linear(self.reduce.out_channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.stem(x)
        s1 = self.normal(s0, s0)
        out = self.reduce(s0, s1)
        return self.head(out.mean(dim=(2, 3)))


def make_space(*, channels: int = CHANNELS) -> ModelSpace:
    """The space, defined for 28x28 grayscale images of 10 classes (a template builds each instance for its data)."""
    return ModelSpace(DartsNet, args={"channels": channels})


class DartsCell(SpaceModel):
    @classmethod
    def space(cls) -> ModelSpace:
        return make_space()

    @staticmethod
    def training_knobs():
        return {
            "learning_rate": FloatKnob(1e-3, 1e-2, is_exp=True),
            "epochs": FixedKnob(10),
            "batch_size": FixedKnob(64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
        }

    def base_args(self) -> dict[str, int]:
        in_channels, height, width = self.input_shape
        channels = max(2, CHANNELS // 2) if self.downscaled else CHANNELS
        return {"in_channels": in_channels, "height": height, "width": width, "classes": self.output_size,
                "channels": channels}  # fmt: skip

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))
