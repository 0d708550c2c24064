"""MobileNetBlocks: a MobileNetV2 block space, whose depths decide which block decisions exist.

Task IMAGE_CLASSIFICATION; any strategy searches it. A stem convolution, then the stages
of :data:`STAGES` (output channels and stride of their first block), each of 1 to 3
inverted-residual blocks, then a 1x1 convolution, global pooling and a linear
classifier. Every decision is a :func:`~baobab.space.value_choice` read while the
network is built: ``depth<s>`` (blocks of stage ``s``), and per block ``b`` of it
``kernel<s>_<b>`` (3, 5 or 7: the depthwise convolution's) and ``expand<s>_<b>`` (3 or
6: the expansion ratio). A block's decisions exist only when its stage is deep enough
to have the block: with ``depth0 = 1``, ``kernel0_1`` and ``kernel0_2`` are no part of
the trial's architecture, and two trials that differ only in them are the same network.

Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", CVPR 2018: a
block expands its input with a 1x1 convolution, filters it with a depthwise one, and
projects it back linearly (no activation), adding its input when the shapes allow (every
block after a stage's first). The search over kernel sizes, expansion ratios and depths
is ProxylessNAS's and Once-for-All's (Cai et al., ICLR 2019 and 2020). The stages are
three small ones, where MobileNetV2 has seven, and the stem halves only images of 16
pixels and more. ``DOWNSCALE`` halves the channels; ``SHARE_PARAMS`` starts a trial from
its parent trial's weights for every module the two architectures have in common.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob, FloatKnob, PolicyKnob
from baobab.space import ModelSpace, SpaceModel, value_choice
from baobab.store import read_image_files

#: Per stage: the output channels, and the stride of its first block.
STAGES = ((16, 1), (24, 2), (32, 2))
#: Channels of the stem, and of the 1x1 convolution before pooling.
STEM, HEAD = 16, 64
#: The choices of every stage and block (the first of each is the base's).
DEPTHS, KERNELS, EXPANSIONS = (1, 2, 3), (3, 5, 7), (3, 6)


def conv_bn(in_channels: int, out_channels: int, kernel: int = 1, *, stride: int = 1, groups: int = 1,
            relu: bool = True) -> list[nn.Module]:  # fmt: skip
    """A convolution and batch norm, then ReLU6 unless the convolution is a linear projection."""
    layers = [
        nn.Conv2d(in_channels, out_channels, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
    ]
    return [*layers, nn.ReLU6()] if relu else layers


def inverted_residual(in_channels: int, out_channels: int, *, kernel: int, expand: int, stride: int) -> nn.Sequential:
    """Expand (1x1), filter (depthwise ``kernel`` x ``kernel``, ``stride``), project (1x1, linear)."""
    hidden = in_channels * expand
    return nn.Sequential(
        *conv_bn(in_channels, hidden),
        *conv_bn(hidden, hidden, kernel, stride=stride, groups=hidden),
        *conv_bn(hidden, out_channels, relu=False),
    )


class Residual(nn.Module):
    """A block whose input is added to its output: a block after its stage's first."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class BlockNet(nn.Module):
    """The base: every stage one block of 3x3 kernels and expansion 3; the value choices say otherwise."""

    def __init__(
        self, *, in_channels: int = 1, height: int = 28, width: int = 28, classes: int = 10, width_mult: float = 1.0
    ) -> None:
        super().__init__()
        scaled = lambda channels: max(4, int(channels * width_mult))  # noqa: E731
        stem_stride = 2 if min(height, width) >= 16 else 1  # Fashion-MNIST's 28x28 to 14x14: a quarter of the work
        layers = conv_bn(in_channels, scaled(STEM), 3, stride=stem_stride)
        channels = scaled(STEM)
        for s, (out_channels, stride) in enumerate(STAGES):
            for b in range(value_choice(f"depth{s}", DEPTHS)):
                block = inverted_residual(
                    channels if b == 0 else scaled(out_channels),
                    scaled(out_channels),
                    kernel=value_choice(f"kernel{s}_{b}", KERNELS),
                    expand=value_choice(f"expand{s}_{b}", EXPANSIONS),
                    stride=stride if b == 0 else 1,
                )
                layers.append(block if b == 0 else Residual(block))
            channels = scaled(out_channels)
        layers += [
            *conv_bn(channels, scaled(HEAD)),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(scaled(HEAD), classes),
        ]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def make_space(*, width_mult: float = 1.0) -> ModelSpace:
    """The space, defined for 28x28 grayscale images of 10 classes (a template builds each instance for its data)."""
    return ModelSpace(BlockNet, args={"width_mult": width_mult})


class MobileNetBlocks(SpaceModel):
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

    def base_args(self) -> dict[str, float]:
        in_channels, height, width = self.input_shape
        return {"in_channels": in_channels, "height": height, "width": width, "classes": self.output_size,
                "width_mult": 0.5 if self.downscaled else 1.0}  # fmt: skip

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))
