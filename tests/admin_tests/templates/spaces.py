"""Model-space templates for the upload check: one that is right, and one per definition error."""

import numpy as np
import torch
from torch import nn

from baobab.model import FixedKnob
from baobab.space import InputMutator, ModelSpace, OperatorMutator, SpaceModel, keep


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Branchy(Net):
    def forward(self, x):
        if x.sum() > 0:
            return self.out(self.fc2(self.fc1(x)))
        return x


class _Base(SpaceModel):
    @staticmethod
    def training_knobs():
        return {"epochs": FixedKnob(1)}

    def load_data(self, dataset_path):
        return np.zeros((4, 4), np.float32), np.zeros(4, np.int64)


class Searched(_Base):
    @classmethod
    def space(cls):
        return ModelSpace(
            Net,
            [
                OperatorMutator("act", "relu*", {"relu": None, "tanh": lambda _: nn.Tanh()}, per_node=False),
                InputMutator("skip", "out", ["relu_1", "relu"]),
            ],
        )


class NoMatch(_Base):
    @classmethod
    def space(cls):
        return ModelSpace(Net, [OperatorMutator("conv", nn.Conv2d, {"k3": keep})])


class BadCandidate(_Base):
    @classmethod
    def space(cls):
        return ModelSpace(Net, [OperatorMutator("pair", "fc2", {"bi": lambda _: nn.Bilinear(8, 8, 8)})])


class Untraceable(_Base):
    @classmethod
    def space(cls):
        return ModelSpace(Branchy)
