"""TorchCnn: a small convolutional network for image classification (e.g. Fashion-MNIST).

Task IMAGE_CLASSIFICATION. Each block is convolution, batch norm, ReLU and 2x2 max
pooling, doubling the channels; a dropout and a linear layer classify. Works for any
image size and for grayscale or RGB: the first layer is sized from the data.
Predictions are class probabilities, index = class.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baobab.model import CategoricalKnob, FloatKnob, IntegerKnob, PolicyKnob, TorchModel
from baobab.store import read_image_files


class TorchCnn(TorchModel):
    @staticmethod
    def get_knob_config():
        return {
            "learning_rate": FloatKnob(3e-4, 1e-2, is_exp=True),
            "channels": CategoricalKnob([8, 16, 32]),
            "depth": IntegerKnob(1, 3),
            "kernel_size": CategoricalKnob([3, 5]),
            "dropout": FloatKnob(0.0, 0.5),
            "epochs": IntegerKnob(3, 10),
            "batch_size": CategoricalKnob([32, 64, 128]),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
        }

    def build_module(self, downscale: bool) -> nn.Module:
        # Downscaled: half the channels and one block less.
        channels = max(4, self.knobs["channels"] // 2) if downscale else self.knobs["channels"]
        depth = max(1, self.knobs["depth"] - 1) if downscale else self.knobs["depth"]
        kernel = self.knobs["kernel_size"]
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
        layers += [
            nn.Flatten(),
            nn.Dropout(self.knobs["dropout"]),
            nn.Linear(in_channels * height * width, self.output_size),
        ]
        return nn.Sequential(*layers)

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        dataset = read_image_files(dataset_path)
        return dataset.images, dataset.labels

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        """uint8 (N,H,W) or (N,H,W,C) in 0..255 to float (N,C,H,W) in 0..1."""
        images = np.asarray(inputs, dtype=np.float32) / 255.0
        images = images[:, None] if images.ndim == 3 else images.transpose(0, 3, 1, 2)
        return torch.from_numpy(np.ascontiguousarray(images))
