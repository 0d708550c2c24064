"""A template whose ``width`` knob can describe an architecture that cannot be built.

The model splits a hidden layer of ``width`` units into two equal halves, so an odd
width has no model: ``train()`` says so with :class:`InvalidArchitectureError`, as a
real template does when it builds its module for a point of its space and finds that
the shapes do not fit. The other widths train a threshold on feature ``a``; the score
is the validation accuracy less a small cost per unit, so the widths score apart.
"""

import numpy as np

from baobab.exceptions import InvalidArchitectureError
from baobab.model import BaseModel, CategoricalKnob
from baobab.store import read_tabular

WIDTHS = [2, 4, 5, 8]


class Halves(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"width": CategoricalKnob(WIDTHS)}

    def train(self, dataset_path, shared_params=None, *, target="y", **train_args):
        width = self.knobs["width"]
        if width % 2:
            raise InvalidArchitectureError(f"a hidden layer of {width} units cannot be split into two equal halves")
        data = read_tabular(dataset_path, target=target)
        self.target = target
        self.threshold = np.array([float(np.median(data.features[:, 0]))])

    def _predict(self, features):
        return (np.asarray(features, dtype=np.float64)[:, 0] > self.threshold[0]).astype(int)

    def evaluate(self, dataset_path):
        data = read_tabular(dataset_path, target=self.target)
        return float((self._predict(data.features) == data.target).mean()) - self.knobs["width"] / 1000

    def predict(self, queries):
        return self._predict(queries).tolist()

    def dump_parameters(self):
        return {"threshold": self.threshold}

    def load_parameters(self, params):
        self.threshold = params["threshold"]
