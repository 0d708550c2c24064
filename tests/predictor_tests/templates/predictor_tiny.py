"""Small NumPy templates for the predictor's tests, some misbehaving on purpose.

``TinyRegressor`` is least squares on a TABULAR dataset plus the knob ``offset``. A
query whose first value is 555 makes every instance raise; the knobs ``raise_on``,
``sleep_on``, ``pause_on`` and ``crash_on`` name first values that make one instance
raise, sleep a minute, sleep two seconds (then answer) or kill its own process;
``batch_delay_s`` makes every call take that long more (a model busy with each batch). When
``batch_log`` names a file, every ``predict`` call appends its batch size there, one
line a call.

``ConstantVoter`` answers the label ``label`` to every query (TABULAR_CLASSIFICATION).
"""

from __future__ import annotations

import os
import time

import numpy as np

from baobab.model import BaseModel, FixedKnob, FloatKnob
from baobab.store import read_tabular

POISON = 555
PAUSE_S = 2.0


class TinyRegressor(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "offset": FloatKnob(-100.0, 100.0),
            "batch_log": FixedKnob(""),
            "raise_on": FixedKnob(None),
            "sleep_on": FixedKnob(None),
            "pause_on": FixedKnob(None),
            "crash_on": FixedKnob(None),
            "batch_delay_s": FixedKnob(0.0),
        }

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        self.weights = np.zeros(0)
        self.bias = 0.0

    def train(self, dataset_path, shared_params=None, *, target="target", seed=0):
        data = read_tabular(dataset_path, target=target)
        x = np.hstack([data.features.astype(np.float64), np.ones((len(data.features), 1))])
        solution, *_ = np.linalg.lstsq(x, data.target, rcond=None)
        self.weights, self.bias = solution[:-1], float(solution[-1])
        self.target = target

    def evaluate(self, dataset_path):
        data = read_tabular(dataset_path, target=self.target)
        error = self._predict(data.features) - data.target
        return float(1.0 - error.var() / data.target.var())

    def _predict(self, features):
        return np.asarray(features, dtype=np.float64) @ self.weights + self.bias + self.knobs["offset"]

    def predict(self, queries):
        if self.knobs.get("batch_log"):
            with open(self.knobs["batch_log"], "a") as f:
                f.write(f"{len(queries)}\n")
        firsts = {query[0] for query in queries}
        if POISON in firsts or self.knobs.get("raise_on") in firsts:
            raise ValueError(f"cannot predict first value {sorted(firsts & {POISON, self.knobs.get('raise_on')})}")
        if self.knobs.get("crash_on") in firsts:
            os._exit(3)
        if self.knobs.get("sleep_on") in firsts:
            time.sleep(60)
        if self.knobs.get("pause_on") in firsts:
            time.sleep(PAUSE_S)
        time.sleep(self.knobs.get("batch_delay_s") or 0.0)
        return self._predict(queries).tolist() if queries else []

    def dump_parameters(self):
        return {"weights": self.weights, "bias": self.bias}

    def load_parameters(self, params):
        self.weights, self.bias = np.asarray(params["weights"]), float(params["bias"])


class ConstantVoter(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"label": FixedKnob(0)}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.5

    def predict(self, queries):
        return [self.knobs["label"] for _ in queries]

    def dump_parameters(self):
        return {"label": self.knobs["label"]}

    def load_parameters(self, params):
        pass
