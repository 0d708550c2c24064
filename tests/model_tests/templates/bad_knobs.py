"""Templates whose knob configs are broken."""

from baobab.model import BaseModel, FloatKnob


class _Model(BaseModel):
    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.0

    def predict(self, queries):
        return [0 for _ in queries]

    def dump_parameters(self):
        return {}

    def load_parameters(self, params):
        pass


class RaisingKnobs(_Model):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(1e-4, 1e-1, is_exp=True), "depth": undefined_name}  # noqa: F821


class InvertedRange(_Model):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(0.1, 0.001)}


class NotADict(_Model):
    @staticmethod
    def get_knob_config():
        return [FloatKnob(0.0, 1.0)]
