"""A template whose trials take ``train_args["sleep_s"]`` seconds and score their knob: for restart tests."""

import time

import numpy as np

from baobab.model import BaseModel, FloatKnob


class SlowScorer(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0)}

    def train(self, dataset_path, shared_params=None, *, sleep_s=0.5, **train_args):
        # Half the time, a report (an interim metric), the rest: a trial that takes a while and logs.
        time.sleep(sleep_s / 2)
        self.context.report(1, x=self.knobs["x"])
        time.sleep(sleep_s / 2)
        print(f"slept {sleep_s} s")

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        pass
