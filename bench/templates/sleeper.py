"""A template that does no work but sleep ``train_args["sleep_s"]``: it measures the platform, not a model."""

import time

import numpy as np

from baobab.model import BaseModel, FloatKnob


class Sleeper(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0)}

    def train(self, dataset_path, shared_params=None, *, sleep_s=0.0, **train_args):
        if sleep_s:
            time.sleep(sleep_s)

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        self.knobs["x"] = float(params["x"][0])
