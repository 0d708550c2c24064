"""A TorchModel template that counts its decodes and trains only once its siblings do: the shared data test.

``load_data`` appends the dataset's path to ``<signal_dir>/loads`` each time it decodes one.
``fit_module`` (once the training set is loaded, before training) writes
``<signal_dir>/training-<pid>`` and waits until ``siblings`` train arg processes have, so the
trials of a job run at once, in as many worker processes.
"""

import os
import time
from pathlib import Path

import torch

from baobab.model import FixedKnob, IntegerKnob, TorchModel
from baobab.store import read_tabular

WAIT_S = 60.0


class SharedData(TorchModel):
    @staticmethod
    def get_knob_config():
        return {"width": IntegerKnob(2, 16), "epochs": FixedKnob(1), "batch_size": FixedKnob(8)}

    def build_module(self, downscale):
        width = self.knobs["width"]
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], width), torch.nn.ReLU(), torch.nn.Linear(width, self.output_size)
        )

    def load_data(self, dataset_path):
        signals = Path(self.train_args["signal_dir"])
        with open(signals / "loads", "a") as f:
            f.write(f"{dataset_path}\n")
        data = read_tabular(dataset_path, target=self.train_args["target"])
        return data.features, data.target

    def fit_module(self, module, inputs, targets):
        signals = Path(self.train_args["signal_dir"])
        pid = os.environ.get("_BAOBAB_HOST_PID", os.getpid())  # getpid() is 2 in each worker's PID namespace
        (signals / f"training-{pid}").touch()
        deadline = time.monotonic() + WAIT_S
        while len(list(signals.glob("training-*"))) < self.train_args["siblings"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the other trials did not start training within {WAIT_S:g} s")
            time.sleep(0.05)
