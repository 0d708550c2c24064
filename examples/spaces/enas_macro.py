"""EnasMacro: ENAS's macro search space as a model space (a base model and its choices).

Task IMAGE_CLASSIFICATION; any strategy searches it. After a stem convolution come
``LAYERS`` layers. Each layer's operation is a :class:`~baobab.space.LayerChoice` among
:data:`OPS`, the operations of ``examples/models/enas_cnn.py`` (3x3 and 5x5 convolutions,
3x3 and 5x5 depthwise-separable convolutions, 3x3 max and average pooling), and for every
earlier layer an :class:`~baobab.space.InputChoice` decides whether that layer's output
is added to the layer's (a skip connection): decision ``op<i>`` and decisions
``skip<i>_<j>``, the same positions as ``enas_cnn.py``'s ``arch`` knob, so the two spaces
are the same set of architectures. Max pooling halves the maps after the stem (on images
of 16 pixels and more) and after the first and second thirds of the layers; skips from
larger maps are average-pooled to fit. A linear layer on the last maps classifies.

Pham et al., "Efficient Neural Architecture Search via Parameter Sharing", ICML 2018,
section 2.3. ``enas_cnn.py`` writes this space as one super-network whose ``forward``
runs the architecture of its knob; here the base is an ordinary network (every operation
a 3x3 convolution, no skips) and each trial's network is built with only its own
operations and skips. A skip's two candidates are the earlier layer's output and zeros
(a layer without that skip adds zeros): an input choice chooses among inputs and cannot
choose none. A layer sums its skips onto its output (``enas_cnn.py`` averages them;
ENAS's code batch-normalises the sum, which scored lower here: 0.78 and 0.82 validation
accuracy against 0.85 and 0.84 without it, for the base on 1,800 Fashion-MNIST images,
two seeds). ``DOWNSCALE`` halves the channels; ``SHARE_PARAMS`` starts a trial from its
parent trial's weights for every module the two architectures have in common, and from the
super-network's weights for every other operation some earlier trial trained.

Search it with the ``enas`` strategy as ``enas_cnn.py``: the controller chooses each decision
in turn (``op0``, ``op1``, ``skip1_0``, ...), the shared weights are the super-network that
:class:`~baobab.space.SpaceModel` hands from trial to trial, and an evaluation
(``SHARE_PARAMS`` and ``SKIP_TRAIN``) re-estimates its batch-norm statistics first.
``EARLY_STOP`` trains one epoch: a shared training is a short turn of one architecture.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob, PolicyKnob
from baobab.space import InputChoice, LayerChoice, ModelSpace, SpaceModel
from baobab.store import read_image_files

#: The operations a layer chooses from (the first is the base's).
OPS = ("conv3", "conv5", "sep3", "sep5", "max", "avg")
#: Layers of the network.
LAYERS = 6
#: Channels of every layer (half under DOWNSCALE).
CHANNELS = 16


def operation(name: str, channels: int) -> nn.Module:
    """One of :data:`OPS`, as ``enas_cnn.py`` builds it."""
    if name in ("conv3", "conv5"):
        kernel = int(name[-1])
        return nn.Sequential(
            nn.Conv2d(channels, channels, kernel, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
    if name in ("sep3", "sep5"):
        kernel = int(name[-1])
        return nn.Sequential(
            nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels, bias=False),
            nn.Conv2d(channels, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
    if name == "max":
        return nn.MaxPool2d(3, stride=1, padding=1)
    return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)


def _halve(size: tuple[int, int], halve: bool) -> tuple[int, int]:
    return (size[0] // 2, size[1] // 2) if halve else size


class Layer(nn.Module):
    """One layer: its operation, and a skip choice per earlier layer with the pooling that fits that layer's maps."""

    def __init__(self, index: int, channels: int, skip_halvings: list[int], reduce: bool) -> None:
        super().__init__()
        self.op = LayerChoice({name: operation(name, channels) for name in OPS}, label=f"op{index}")
        # nn.Identity and nn.AvgPool2d stay nodes of their own, so a skip's candidates read
        # ``layers_3_no_skip`` and ``layers_3_skip_from_1`` rather than torch.fx's numbered names.
        self.no_skip = nn.Identity()
        self.skip_from = nn.ModuleList(nn.AvgPool2d(2**k) if k else nn.Identity() for k in skip_halvings)
        self.skips = nn.ModuleList(InputChoice(2, label=f"skip{index}_{j}") for j in range(index))
        self.reduce = nn.MaxPool2d(2) if reduce else nn.Identity()


class EnasMacroNet(nn.Module):
    """The base: a chain of ``layers`` operations on ``channels`` channels, then a linear classifier."""

    def __init__(
        self,
        *,
        in_channels: int = 1,
        height: int = 28,
        width: int = 28,
        classes: int = 10,
        channels: int = CHANNELS,
        layers: int = LAYERS,
    ) -> None:
        super().__init__()
        stem_pool = min(height, width) >= 16  # Fashion-MNIST's 28x28 to 14x14: a quarter of the work, little lost
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(2) if stem_pool else nn.Identity(),
        )
        size = _halve((height, width), stem_pool)
        reduce_after = {layers // 3 - 1, 2 * layers // 3 - 1} - {-1}
        plan: list[tuple[int, bool]] = []  # per layer: the halvings of the maps before it, and whether it halves them
        for i in range(layers):
            reduce = i in reduce_after and min(size) >= 2
            plan.append((sum(r for _, r in plan), reduce))
            size = _halve(size, reduce)
        self.layers = nn.ModuleList(
            Layer(i, channels, [halvings - plan[j][0] for j in range(i)], reduce)
            for i, (halvings, reduce) in enumerate(plan)
        )
        self.head = nn.Linear(channels * size[0] * size[1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        outputs: list[torch.Tensor] = []
        for layer in self.layers:
            y = layer.op(x)
            none = layer.no_skip(torch.zeros_like(y))
            for skip, fit, earlier in zip(layer.skips, layer.skip_from, outputs, strict=True):
                y = y + skip([none, fit(earlier)])
            outputs.append(y)
            x = layer.reduce(y)
        return self.head(x.flatten(1))


def make_space(*, layers: int = LAYERS, channels: int = CHANNELS) -> ModelSpace:
    """The space of ``layers`` layers, defined for 28x28 grayscale images of 10 classes (a
    template builds each instance for its data)."""
    return ModelSpace(EnasMacroNet, args={"layers": layers, "channels": channels})


class EnasMacro(SpaceModel):
    @classmethod
    def space(cls) -> ModelSpace:
        return make_space()

    @staticmethod
    def training_knobs():
        return {
            "learning_rate": FixedKnob(3e-3),
            "epochs": FixedKnob(10),
            "batch_size": FixedKnob(64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
            "skip_train": PolicyKnob("SKIP_TRAIN"),
        }

    def early_stop_epochs(self) -> int:
        """One epoch: a shared-weight training is a short turn of one architecture (as ``enas_cnn.py``'s)."""
        return 1

    def base_args(self) -> dict[str, int]:
        in_channels, height, width = self.input_shape
        channels = max(4, CHANNELS // 2) if self.downscaled else CHANNELS
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
