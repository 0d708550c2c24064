"""A template that does nothing: it measures the platform's overhead per trial."""

import numpy as np

from baobab.model import BaseModel, CategoricalKnob, FloatKnob, PolicyKnob

MODES = ["ok"]


class Noop(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"mode": CategoricalKnob(MODES), "x": FloatKnob(0.0, 1.0), "quick": PolicyKnob("EARLY_STOP")}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        self.knobs["x"] = float(params["x"][0])
