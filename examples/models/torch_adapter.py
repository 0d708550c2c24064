"""TorchAdapter: a searched classifier head on the frozen convolutional base of a pre-trained TorchCnn.

Task IMAGE_CLASSIFICATION. The base is the convolutional part of a ``TorchCnn`` from the
model zoo (``examples/models/torch_cnn.py``: conv, batch norm, ReLU and 2x2 max pooling
blocks, doubling the channels), named by the job's option ``base_model`` (a zoo model id:
``options={"base_model": 12}``; the platform passes it to ``train()`` as ``base_model``). Only
the head trains: flatten, a linear layer of ``adapter_width`` units, ReLU, dropout and a linear
classifier; learning rate, weight decay, dropout and width are searched.

The base's architecture is declared by the ``base_*`` FixedKnobs, so that saved parameters
rebuild the module without the zoo (inference, the platform's reload check); change them to
match another zoo model. The base's weights come from the zoo each time a trial trains, after
any warm start or shared parameters, so every trial trains on exactly the zoo model's base:
frozen, and in eval mode whatever mode the network is put in, so its BatchNorm statistics
never change. Trials of one job that share the width run fused with the base kept once
(``options={"base_model": 12, "fusion": {"max_group": 4}}``).

The zoo is reached through the platform (a train job); ``baobab dev test-model`` has none,
and training there fails saying so. Predictions are class probabilities, index = class.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from baobab.model import CategoricalKnob, FixedKnob, FloatKnob, PolicyKnob, TorchModel
from baobab.store import read_image_files


class FrozenBase(nn.Module):
    """A base that never trains: no gradients, and eval mode even inside a network put in train mode."""

    def __init__(self, layers: nn.Sequential) -> None:
        super().__init__()
        self.layers = layers
        self.layers.requires_grad_(False)
        self.layers.eval()

    def train(self, mode: bool = True) -> FrozenBase:
        super().train(mode)
        self.layers.eval()  # BatchNorm keeps using, and never updates, the zoo model's statistics
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TorchAdapter(TorchModel):
    @staticmethod
    def get_knob_config():
        return {
            # The zoo model's architecture: a TorchCnn with these knobs (not downscaled).
            "base_channels": FixedKnob(16),
            "base_depth": FixedKnob(2),
            "base_kernel_size": FixedKnob(3),
            "learning_rate": FloatKnob(1e-4, 3e-2, is_exp=True),
            "weight_decay": FloatKnob(1e-5, 1e-1, is_exp=True),
            "dropout": FloatKnob(0.0, 0.5),
            "adapter_width": CategoricalKnob([32, 64, 128]),
            "epochs": FixedKnob(5),
            "batch_size": FixedKnob(64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
        }

    def build_module(self, downscale: bool) -> nn.Module:
        base, features = self._base()
        width = self.knobs["adapter_width"]
        head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(features, width),
            nn.ReLU(),
            nn.Dropout(self.knobs["dropout"]),
            nn.Linear(width, self.output_size),
        )
        return nn.Sequential(OrderedDict(base=FrozenBase(base), head=head))

    def _base(self) -> tuple[nn.Sequential, int]:
        """TorchCnn's convolutional blocks, layer for layer (so state-dict names match), and their output size."""
        channels, depth, kernel = (self.knobs[k] for k in ("base_channels", "base_depth", "base_kernel_size"))
        in_channels, height, width = self.input_shape
        layers: list[nn.Module] = []
        for i in range(depth):
            out_channels = channels * 2**i
            layers += [
                nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(),
            ]
            if min(height, width) >= 2:
                layers.append(nn.MaxPool2d(2))
                height, width = height // 2, width // 2
            in_channels = out_channels
        return nn.Sequential(*layers), in_channels * height * width

    def fit_module(self, module: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Load the named zoo model's base (after any warm start or shared parameters: the base is always it)."""
        zoo_model_id = self.train_args.get("base_model")
        if isinstance(zoo_model_id, bool) or not isinstance(zoo_model_id, int) or zoo_model_id < 1:
            raise ValueError(
                f"{type(self).__name__} needs the train arg 'base_model' (the job option): the id of a TorchCnn "
                f"zoo model whose convolutional blocks it trains on, got {zoo_model_id!r}"
            )
        zoo = self.zoo_state(zoo_model_id)
        base = module.get_submodule("base").layers
        state = base.state_dict()
        mismatch = _first_mismatch(state, zoo)
        if mismatch is not None:
            knobs = ", ".join(f"{k}={self.knobs[k]}" for k in ("base_channels", "base_depth", "base_kernel_size"))
            raise ValueError(
                f"zoo model {zoo_model_id} is not the base {type(self).__name__} expects (the convolutional "
                f"blocks of a TorchCnn with {knobs} on inputs of shape {self.input_shape}): {mismatch}"
            )
        with torch.no_grad():
            for name, tensor in state.items():
                tensor.copy_(zoo[name])
        base.requires_grad_(False)  # as built; whatever loaded it before, it stays frozen
        base.eval()
        self.context.log(f"base: {len(state)} tensors of zoo model {zoo_model_id}, frozen")

    def make_optimizer(self, params: Iterator[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            [p for p in params if p.requires_grad],
            lr=self.knobs["learning_rate"],
            weight_decay=self.knobs["weight_decay"],
        )

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1, as TorchCnn's."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))


def _first_mismatch(expected: dict[str, torch.Tensor], zoo: dict[str, torch.Tensor]) -> str | None:
    """The first tensor of the base the zoo model lacks or holds in another shape or kind, or a further
    convolution the zoo model has (a deeper network); None when its blocks are the base's."""
    for name, tensor in expected.items():
        if name not in zoo:
            return f"it has no tensor {name!r} (expected shape {tuple(tensor.shape)})"
        if zoo[name].shape != tensor.shape:
            return f"its tensor {name!r} has shape {tuple(zoo[name].shape)}, expected {tuple(tensor.shape)}"
        if zoo[name].is_floating_point() != tensor.is_floating_point():
            return f"its tensor {name!r} is {zoo[name].dtype}, expected {tensor.dtype}"
    for name, tensor in zoo.items():
        if name not in expected and tensor.dim() == 4:
            return f"it has a further convolution {name!r} of shape {tuple(tensor.shape)} (a deeper network)"
    return None
