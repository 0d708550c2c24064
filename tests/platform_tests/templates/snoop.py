"""A hostile template: it looks for the platform's secrets in its environment and on disk, and says what it finds.

``train_args["probe"]`` names what to look for: ``secrets`` (strings) and ``paths`` (files and folders
of the platform). It also reads every ``/proc/<pid>/environ`` it can. Findings are printed (the
trial's log, or the inference worker's) and counted: the score and every prediction are minus
their number, so 0 means nothing was found. The probe travels in the parameters to the predictor.
"""

import glob
import json
import os

import numpy as np

from baobab.model import BaseModel, FloatKnob


def findings(probe):
    """What of ``probe`` this process can see."""
    found = [f"variable {name}" for name in os.environ if name.startswith("BAOBAB_")]
    found += [f"a secret in variable {n}" for n, v in os.environ.items() if any(s in v for s in probe["secrets"])]
    for path in probe["paths"]:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as f:
                    f.read(1)
            found.append(f"read {path}")
        except OSError:
            pass
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as f:
                data = f.read()
        except OSError:
            continue
        found += [f"a secret in {environ}" for s in probe["secrets"] if s.encode() in data]
    return found


class Snoop(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0)}

    def train(self, dataset_path, shared_params=None, *, probe=None, **train_args):
        self.probe = probe
        self.found = findings(probe)
        for line in self.found:
            print(f"found: {line}")
        print(f"probed {len(probe['paths'])} paths and {len(probe['secrets'])} secrets")

    def evaluate(self, dataset_path):
        return -float(len(self.found))

    def predict(self, queries):
        found = findings(self.probe)
        for line in found:
            print(f"found: {line}", flush=True)
        return [-float(len(found)) for _ in queries]

    def dump_parameters(self):
        return {"probe": np.frombuffer(json.dumps(self.probe).encode(), dtype=np.uint8)}

    def load_parameters(self, params):
        self.probe = json.loads(np.asarray(params["probe"], dtype=np.uint8).tobytes().decode())
