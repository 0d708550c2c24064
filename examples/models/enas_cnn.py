"""EnasCnn: ENAS's macro search space for image classification (e.g. Fashion-MNIST).

Task IMAGE_CLASSIFICATION; search it with the ``enas`` strategy. After a stem
convolution come ``LAYERS`` layers; each picks one operation of :data:`OPS` (3x3 and 5x5
convolutions, 3x3 and 5x5 depthwise-separable convolutions, 3x3 max and average pooling)
and, from every earlier layer, whether to add its output (a skip connection). The
``arch`` knob lists the choices layer by layer, as ENAS's controller makes them: layer
``i``'s operation, then its ``i`` skip flags. Max pooling halves the maps after the
stem (on images of 16 pixels and more) and after the first and second thirds of the
layers; skips from larger maps are average-pooled to fit. A linear layer on the last
maps classifies (ENAS pools them globally first, which learnt far slower here: 0.42 to
0.55 validation accuracy against 0.63 to 0.75 after two epochs on 1,800 images).

Pham et al., "Efficient Neural Architecture Search via Parameter Sharing", ICML 2018,
section 2.3. The module is the whole super-network: it holds the weights of every
operation at every layer and runs the architecture of its ``arch`` knob. Its state dict
is the same whatever the architecture, so any trial's parameters load into any other's
under ``SHARE_PARAMS`` (at the same ``DOWNSCALE``), and ``dump_parameters`` passes all
of it on. Each operation has its own batch norm. Under ``SHARE_PARAMS`` and
``SKIP_TRAIN`` (scoring a sampled architecture on the shared weights) the batch-norm
statistics of the operations on its path are first re-estimated on a few training
batches: those that came with the shared weights were gathered under other
architectures. ``EARLY_STOP`` trains one epoch; ``DOWNSCALE`` halves the channels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from baobab.model import ArchKnob, FixedKnob, Policy, PolicyKnob, TorchModel
from baobab.store import read_image_files

#: The operations a layer chooses from.
OPS = ("conv3", "conv5", "sep3", "sep5", "max", "avg")
#: Layers of the super-network.
LAYERS = 6


def arch_positions(layers: int = LAYERS) -> list[list[str | bool]]:
    """The ArchKnob's positions: per layer its operation, then one skip flag per earlier layer."""
    positions: list[list[str | bool]] = []
    for layer in range(layers):
        positions.append(list(OPS))
        positions += [[False, True]] * layer
    return positions


def decode(arch: Sequence[str | bool]) -> list[tuple[str, tuple[bool, ...]]]:
    """An ``arch`` value as (operation, skip flags) per layer."""
    layers, position = [], 0
    while position < len(arch):
        count = len(layers)
        layers.append((str(arch[position]), tuple(bool(s) for s in arch[position + 1 : position + 1 + count])))
        position += 1 + count
    return layers


def operation(name: str, channels: int) -> nn.Module:
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


class SuperNet(nn.Module):
    """Weights for every operation of every layer; runs the architecture it was built for."""

    def __init__(self, input_shape: Sequence[int], classes: int, channels: int, arch: Sequence[str | bool]) -> None:
        super().__init__()
        in_channels, height, width = input_shape
        self.arch = decode(arch)
        layers = len(self.arch)
        self.reduce_after = {layers // 3 - 1, 2 * layers // 3 - 1} - {-1}
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.layers = nn.ModuleList(nn.ModuleDict({op: operation(op, channels) for op in OPS}) for _ in range(layers))
        size = _halved((height, width), min(height, width) >= 16)
        for layer in range(layers):
            size = _halved(size, layer in self.reduce_after and min(size) >= 2)
        self.head = nn.Linear(channels * size[0] * size[1], classes)

    def active_norms(self) -> list[nn.BatchNorm2d]:
        """The batch norms the architecture runs through."""
        modules = [self.stem] + [self.layers[i][op] for i, (op, _) in enumerate(self.arch)]
        return [m for module in modules for m in module.modules() if isinstance(m, nn.BatchNorm2d)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        if min(x.shape[-2:]) >= 16:  # Fashion-MNIST's 28x28 to 14x14: a quarter of the work, little lost
            x = F.max_pool2d(x, 2)
        outputs: list[torch.Tensor] = []
        for i, (op, skips) in enumerate(self.arch):
            y = self.layers[i][op](x)
            extra = [outputs[j] for j, on in enumerate(skips) if on]
            if extra:
                y = (y + sum(F.adaptive_avg_pool2d(o, y.shape[-2:]) for o in extra)) / (1 + len(extra))
            outputs.append(y)
            x = F.max_pool2d(y, 2) if i in self.reduce_after and min(y.shape[-2:]) >= 2 else y
        return self.head(x.flatten(1))


def _halved(size: tuple[int, int], halve: bool) -> tuple[int, int]:
    """The map size after ``max_pool2d(x, 2)`` when ``halve``, the size as is otherwise."""
    return (size[0] // 2, size[1] // 2) if halve else size


class EnasCnn(TorchModel):
    #: Training batches that re-estimate the batch-norm statistics of a sampled
    #: architecture scored on shared weights; 0 keeps the statistics that came with them.
    recalibration_batches: int = 8

    @staticmethod
    def get_knob_config():
        return {
            "arch": ArchKnob(arch_positions()),
            "channels": FixedKnob(16),
            "learning_rate": FixedKnob(3e-3),
            "epochs": FixedKnob(10),
            "batch_size": FixedKnob(64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
            "skip_train": PolicyKnob("SKIP_TRAIN"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
        }

    def early_stop_epochs(self) -> int:
        """One epoch: a shared-weight training is a short turn of one architecture."""
        return 1

    def build_module(self, downscale: bool) -> nn.Module:
        channels = max(4, self.knobs["channels"] // 2) if downscale else self.knobs["channels"]
        return SuperNet(self.input_shape, self.output_size, channels, self.knobs["arch"])

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))

    def fit_module(self, module: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        if not (self.policy(Policy.SHARE_PARAMS) and self.policy(Policy.SKIP_TRAIN)) or not self.recalibration_batches:
            return
        norms = module.active_norms()
        momenta = [norm.momentum for norm in norms]
        for norm in norms:
            norm.reset_running_stats()
            norm.momentum = None  # a plain average over the batches below
        rows = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(self.seed))
        module.train()
        with torch.no_grad():
            for batch in rows[: self.recalibration_batches * self.batch_size()].split(self.batch_size()):
                module(inputs[batch].to(self.device))
        for norm, momentum in zip(norms, momenta, strict=True):
            norm.momentum = momentum
