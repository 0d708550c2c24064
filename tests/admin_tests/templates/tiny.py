"""A small valid template that imports nothing heavy, so that checking it costs little."""

from baobab.model import BaseModel, CategoricalKnob, FixedKnob, FloatKnob, PolicyKnob


class Tiny(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "lr": FloatKnob(1e-4, 1e-1, is_exp=True),
            "kind": CategoricalKnob(["a", "b"]),
            "epochs": FixedKnob(3),
            "quick": PolicyKnob("EARLY_STOP"),
        }

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.5

    def predict(self, queries):
        return [0 for _ in queries]

    def dump_parameters(self):
        return {}

    def load_parameters(self, params):
        pass


def helper():
    return Tiny


NOT_A_CLASS = 3


class NotAModel:
    """Has the methods, but does not derive from BaseModel."""

    @staticmethod
    def get_knob_config():
        return {}


class Incomplete(BaseModel):
    """Misses predict and load_parameters."""

    @staticmethod
    def get_knob_config():
        return {}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.0

    def dump_parameters(self):
        return {}


class InvertedRange(Tiny):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(0.1, 0.001)}


class RaisingKnobs(Tiny):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(1e-4, 1e-1), "depth": undefined_knob_name}  # noqa: F821


class NotADict(Tiny):
    @staticmethod
    def get_knob_config():
        return [FloatKnob(0.0, 1.0)]
