"""Classes that are not BaseModel templates."""

from baobab.model import BaseModel


class NotAModel:
    def train(self, dataset_path):
        pass


class Incomplete(BaseModel):
    """Forgets predict() and load_parameters()."""

    @staticmethod
    def get_knob_config():
        return {}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.0

    def dump_parameters(self):
        return {}


helper = 42
