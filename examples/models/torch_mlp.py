"""TorchMlp: a multi-layer perceptron for tabular classification.

Task TABULAR_CLASSIFICATION. Features are standardised by a first layer whose mean and
standard deviation are fitted on the training set and saved with the weights, so
predict takes raw feature rows. The target column is the job's ``target``, which train()
receives as ``target`` (default "target"). Predictions are class labels as the CSV wrote them.
"""

from __future__ import annotations

import json

import numpy as np
import torch
from torch import nn

from baobab.model import CategoricalKnob, FloatKnob, IntegerKnob, PolicyKnob, TorchModel
from baobab.store import read_tabular


class Standardize(nn.Module):
    """``(x - mean) / std`` with both kept as buffers, so they travel in the state dict."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(features))
        self.register_buffer("std", torch.ones(features))

    def fit(self, inputs: torch.Tensor) -> None:
        std = inputs.std(dim=0, correction=0)
        self.mean.copy_(inputs.mean(dim=0))
        self.std.copy_(torch.where(std > 0, std, torch.ones_like(std)))  # a constant column stays as it is

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class TorchMlp(TorchModel):
    @staticmethod
    def get_knob_config():
        return {
            "learning_rate": FloatKnob(1e-4, 3e-2, is_exp=True),
            "hidden_size": CategoricalKnob([16, 32, 64, 128, 256]),
            "hidden_layers": IntegerKnob(1, 3),
            "dropout": FloatKnob(0.0, 0.5),
            "weight_decay": FloatKnob(1e-6, 1e-2, is_exp=True),
            "epochs": IntegerKnob(10, 60),
            "batch_size": CategoricalKnob([16, 32, 64]),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
        }

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        # Label names of a string target, in index order; None for integer labels.
        self.classes: list[str] | None = None

    def build_module(self, downscale: bool) -> nn.Module:
        size = max(8, self.knobs["hidden_size"] // 2) if downscale else self.knobs["hidden_size"]
        depth = 1 if downscale else self.knobs["hidden_layers"]
        features = self.input_shape[0]
        layers: list[nn.Module] = [Standardize(features)]
        for _ in range(depth):
            layers += [nn.Linear(features, size), nn.ReLU(), nn.Dropout(self.knobs["dropout"])]
            features = size
        layers.append(nn.Linear(features, self.output_size))
        return nn.Sequential(*layers)

    def fit_module(self, module: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        with torch.no_grad():
            module[0].fit(inputs)

    def make_optimizer(self, params) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=self.knobs["learning_rate"], weight_decay=self.knobs["weight_decay"])

    def train(self, dataset_path: str, shared_params=None, **train_args) -> None:
        self.classes = None  # load_data takes them from the training set
        super().train(dataset_path, shared_params, **train_args)

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        # Validation and test sets are read with the training set's label order.
        data = read_tabular(dataset_path, target=self.train_args.get("target", "target"), classes=self.classes)
        if self.classes is None and data.classes is not None:
            self.classes = list(data.classes)
        return data.features, data.target

    def postprocess(self, outputs: torch.Tensor) -> list:
        labels = outputs.argmax(dim=1).tolist()
        return [self.classes[i] for i in labels] if self.classes is not None else labels

    def dump_parameters(self):
        return {**super().dump_parameters(), "classes": json.dumps(self.classes)}

    def load_parameters(self, params) -> None:
        super().load_parameters(params)
        self.classes = json.loads(params["classes"])
