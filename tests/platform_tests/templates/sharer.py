"""A template for the policy tests: logs the shared parameters it got, and reports a step at a time.

Its parameters are its ``x`` knob, so a trial's log line ``received x=...`` says whose
parameters it started from. The first trial to arrive (``arrivals_dir`` counts them
across worker processes) reports ``val_score`` 1.0 at every step, later ones 0.0, so
ASHA has a known weak trial to stop. Between steps it sleeps ``step_s`` and stops once
asked to.
"""

import os
import time

import numpy as np

from baobab.model import BaseModel, FloatKnob, PolicyKnob


def _arrival(folder):
    index = 0
    while True:
        try:
            os.close(os.open(os.path.join(folder, f"arrival-{index}"), os.O_CREAT | os.O_EXCL))
            return index
        except FileExistsError:
            index += 1


class Sharer(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0), "share": PolicyKnob("SHARE_PARAMS")}

    def train(self, dataset_path, shared_params=None, *, arrivals_dir, steps=20, step_s=0.1, **train_args):
        received = None if shared_params is None else float(shared_params["x"][0])
        self.context.log(f"received x={received!r}")
        value = 1.0 if _arrival(arrivals_dir) == 0 else 0.0
        for step in range(1, steps + 1):
            self.context.report(step, val_score=value)
            if self.context.should_stop:
                break
            time.sleep(step_s)
        self.value = value

    def evaluate(self, dataset_path):
        return self.value

    def predict(self, queries):
        return [self.value for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]]), "value": np.array([self.value])}

    def load_parameters(self, params):
        self.value = float(params["value"][0])
