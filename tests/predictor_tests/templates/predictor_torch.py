"""A TorchModel for the predictor's tests whose forward pass ``vmap`` cannot batch.

``ItemNet`` is a linear classifier on a TABULAR dataset whose forward reads a number
with ``.item()``: fine for one module, refused under ``vmap``, so a fused worker falls
back to answering member by member.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob, FloatKnob, TorchModel
from baobab.store import read_tabular


class ItemScaled(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.linear(x)
        return logits / max(1.0, logits.abs().max().item() / 50.0)  # .item(): a number vmap cannot give


class ItemNet(TorchModel):
    @staticmethod
    def get_knob_config():
        return {"learning_rate": FloatKnob(1e-3, 1e-1, is_exp=True), "epochs": FixedKnob(2)}

    def build_module(self, downscale: bool) -> nn.Module:
        return ItemScaled(self.input_shape[0], self.output_size)

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        data = read_tabular(dataset_path, target=self.train_args.get("target", "target"))
        return data.features, data.target

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(inputs, dtype=np.float32) / 1000.0)

    def make_optimizer(self, params) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=self.knobs["learning_rate"])
