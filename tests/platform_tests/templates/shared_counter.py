"""A template for ENAS's shared weights: its parameters count the shared trainings folded into them.

A shared training (SHARE_PARAMS on, SKIP_TRAIN off) sleeps ``train_s``, then adds one to
the count of its architecture's choice in the parameters it started from (zeros without
any); every other trial keeps those it was given. ``evaluate`` answers the total: the
number of shared trainings in the weights the trial was handed (plus its own).
"""

import time

import numpy as np

from baobab.model import ArchKnob, BaseModel, PolicyKnob


class SharedCounter(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "arch": ArchKnob([[0, 1, 2, 3]]),
            **{name.lower(): PolicyKnob(name) for name in ("SHARE_PARAMS", "SKIP_TRAIN", "QUICK_EVAL", "DOWNSCALE")},
            "early_stop": PolicyKnob("EARLY_STOP"),
        }

    def train(self, dataset_path, shared_params=None, *, train_s=2.0, **train_args):
        counts = np.zeros(4) if shared_params is None else np.array(shared_params["counts"], dtype=float)
        if not self.knobs["skip_train"]:
            time.sleep(train_s)
            counts[self.knobs["arch"][0]] += 1
        self.counts = counts

    def evaluate(self, dataset_path):
        return float(self.counts.sum())

    def predict(self, queries):
        return [0 for _ in queries]

    def dump_parameters(self):
        return {"counts": self.counts}

    def load_parameters(self, params):
        self.counts = np.array(params["counts"], dtype=float)
