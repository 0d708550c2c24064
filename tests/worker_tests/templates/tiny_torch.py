"""A small TorchModel for the fused-trial tests: its learning rate is the one knob a strategy searches.

``score()``, called after every batch, writes ``<signal_dir>/training-<pid>`` and holds
training while ``<signal_dir>/hold`` exists (for at most a minute), so that a test can
stop a trial or kill the process in the middle of a training step. A trial asked to stop
is let go at once, writing ``<signal_dir>/stop-seen``. ``WideTinyTorch`` takes learning
rates up to 1e6, at which its loss diverges.
"""

import os
import time
from pathlib import Path

import torch

from baobab.model import FixedKnob, FloatKnob, TorchModel
from baobab.store import read_tabular

HOLD_S = 60.0


class TinyTorch(TorchModel):
    @staticmethod
    def get_knob_config():
        return {
            "learning_rate": FloatKnob(1e-2, 3e-1, is_exp=True),
            "width": FixedKnob(8),
            "epochs": FixedKnob(4),
            "batch_size": FixedKnob(8),
        }

    def build_module(self, downscale):
        width = self.knobs["width"]
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], width), torch.nn.ReLU(), torch.nn.Linear(width, self.output_size)
        )

    def make_optimizer(self, params):
        return torch.optim.SGD(params, lr=self.knobs["learning_rate"], momentum=0.9)

    def load_data(self, dataset_path):
        data = read_tabular(dataset_path, target=self.train_args["target"])
        return data.features, data.target

    def score(self, outputs, targets):
        signals = Path(self.train_args["signal_dir"])
        pid = os.environ.get("_BAOBAB_HOST_PID", os.getpid())  # getpid() is 2 in each worker's PID namespace
        (signals / f"training-{pid}").touch()
        deadline = time.monotonic() + HOLD_S
        while (signals / "hold").exists() and time.monotonic() < deadline:
            if self.context.should_stop:
                (signals / "stop-seen").touch()
                break
            time.sleep(0.02)
        return super().score(outputs, targets)


class WideTinyTorch(TinyTorch):
    @staticmethod
    def get_knob_config():
        return {**TinyTorch.get_knob_config(), "learning_rate": FloatKnob(1e-2, 1e6, is_exp=True)}
