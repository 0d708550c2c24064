"""Small NumPy templates for the dev runner's tests: one good, the others broken on purpose.

``Centroid`` is a nearest-centroid classifier on a TABULAR dataset (train arg
``target`` names the label column). Its train args ``fail_marker`` and ``fail_how``
make exactly one trial fail: the first to find no file at ``fail_marker`` creates it,
then raises, finds its architecture invalid, calls ``os._exit(3)``, segfaults or never
returns, as ``fail_how`` says;
``fail_how="wait_for_stop"`` waits until the platform asks it to stop, then trains.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from baobab.exceptions import InvalidArchitectureError
from baobab.model import BaseModel, CategoricalKnob, FixedKnob, FloatKnob, PolicyKnob
from baobab.store import read_tabular


class Centroid(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "shrink": FloatKnob(0.0, 0.9),
            "norm": CategoricalKnob(["l1", "l2"]),
            "kind": FixedKnob("centroid"),
            "quick": PolicyKnob("EARLY_STOP"),
        }

    def train(self, dataset_path, shared_params=None, *, target="target", fail_marker=None, fail_how=None):
        if fail_marker is not None and not os.path.exists(fail_marker):
            open(fail_marker, "w").close()
            self._fail(fail_how)
            while fail_how == "wait_for_stop" and not self.context.should_stop:
                time.sleep(0.05)
        data = read_tabular(dataset_path, target=target)
        self.target = target
        self.classes = np.unique(data.target)
        centre = data.features.mean(axis=0)
        means = np.stack([data.features[data.target == c].mean(axis=0) for c in self.classes])
        self.centroids = centre + (1.0 - self.knobs["shrink"]) * (means - centre)
        self.context.report(1, train_accuracy=self._accuracy(data))
        self.context.log(f"fitted {len(self.classes)} classes")

    @staticmethod
    def _fail(how):
        if how == "raise":
            raise RuntimeError("boom in train")
        if how == "invalid":
            raise InvalidArchitectureError("a 4-feature input cannot feed a 5-wide grouped layer")
        if how == "exit":
            os._exit(3)
        if how == "segfault":
            ctypes.string_at(0)
        if how == "hang":
            while True:
                time.sleep(0.05)

    def _predict(self, features):
        diff = np.asarray(features, dtype=np.float32)[:, None, :] - self.centroids[None]
        distance = np.abs(diff).sum(-1) if self.knobs["norm"] == "l1" else (diff**2).sum(-1)
        return self.classes[distance.argmin(axis=1)]

    def _accuracy(self, data):
        return float((self._predict(data.features) == data.target).mean())

    def evaluate(self, dataset_path):
        return self._accuracy(read_tabular(dataset_path, target=self.target))

    def predict(self, queries):
        return self._predict(queries).tolist()

    def dump_parameters(self):
        return {"centroids": self.centroids, "classes": self.classes}

    def load_parameters(self, params):
        self.centroids = params["centroids"]
        self.classes = params["classes"]


class StrScore(Centroid):
    def evaluate(self, dataset_path):
        return str(super().evaluate(dataset_path))


class NanScore(Centroid):
    def evaluate(self, dataset_path):
        return float("nan")


class Forgetful(Centroid):
    """Loads zeros instead of its centroids: a fresh instance predicts the first class."""

    def load_parameters(self, params):
        self.centroids = np.zeros_like(params["centroids"])
        self.classes = params["classes"]


class Unstorable(Centroid):
    def dump_parameters(self):
        return {"centroids": self.centroids.tolist(), "classes": self.classes}


_trained_here = {}


class ProcessBound(Centroid):
    """Keeps its centroids in a module global: they reload in the process that trained them only."""

    def dump_parameters(self):
        _trained_here["centroids"] = self.centroids
        return {"classes": self.classes}

    def load_parameters(self, params):
        self.centroids = _trained_here["centroids"]
        self.classes = params["classes"]
