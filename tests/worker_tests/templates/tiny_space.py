"""A SpaceModel small enough to train in a second: a three-layer MLP whose activations and middle
layer the search may change.

Its decisions are ``act_relu`` and ``act_relu_1`` (``relu`` keeps the base's activation,
``tanh`` replaces it) and ``deep_fc2`` (``same`` keeps the layer, ``deeper`` makes it a
block of three): each names its mutator, then the node it changes. It reads any TABULAR
dataset, its target column the ``target`` train arg (``y`` by default).
"""

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob
from baobab.space import ModelSpace, OperatorMutator, SpaceModel, keep
from baobab.store import read_tabular

HIDDEN = 8


class Mlp(nn.Module):
    def __init__(self, features=2, classes=2):
        super().__init__()
        self.fc1 = nn.Linear(features, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, classes)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.out(torch.relu(self.fc2(h)))


def deeper(layer):
    return nn.Sequential(layer, nn.ReLU(), nn.Linear(HIDDEN, HIDDEN))


class TinySpace(SpaceModel):
    @classmethod
    def space(cls):
        return ModelSpace(
            Mlp,
            [
                OperatorMutator("act", "relu*", {"relu": None, "tanh": lambda _: nn.Tanh()}),
                OperatorMutator("deep", "fc2", {"same": keep, "deeper": deeper}),
            ],
        )

    @staticmethod
    def training_knobs():
        return {"epochs": FixedKnob(3), "learning_rate": FixedKnob(0.05)}

    def base_args(self):
        return {"features": self.input_shape[0], "classes": self.output_size}

    def load_data(self, dataset_path):
        data = read_tabular(dataset_path, target=str(self.train_args.get("target", "y")))
        return np.asarray(data.features, dtype=np.float32), np.asarray(data.target, dtype=np.int64)
