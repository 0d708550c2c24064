"""A template for the worker tests: the ``mode`` knob picks what ``train()`` does.

- ``ok``: reads the TABULAR dataset, prints a line (and a progress "bar" on stderr),
  reports a metric, logs a line.
- ``raise`` / ``memory`` / ``exit`` / ``segfault`` / ``hang``: raises ValueError /
  MemoryError, calls ``os._exit(3)``, reads address 0, loops forever.
- ``wait``: like ``ok``, then creates ``<signal_dir>/started-<x>`` and waits for
  ``<signal_dir>/go-<x>`` (so a test can look at the database while it runs).
- ``until_stop``: like ``ok``, then waits until the platform asks it to stop.
- ``nan``: ``evaluate()`` returns NaN.

The score is the ``x`` knob. What the trial saw (process id, how many times this file
was imported in the process, the dataset object's id, the seed, OMP_NUM_THREADS, the
threads of numpy's BLAS pool, the soft/hard data limit in MiB) is printed as one
``probe ...`` line, which the tests read back from the trial's log.
"""

import builtins
import ctypes
import os
import resource
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info

from baobab.model import BaseModel, CategoricalKnob, FloatKnob, PolicyKnob
from baobab.store import read_tabular

# Counted where every import of this file in the process sees it (each import is a new module).
IMPORTS = builtins.__dict__["_baobab_probe_imports"] = builtins.__dict__.get("_baobab_probe_imports", 0) + 1

MODES = ["ok", "forgetful", "raise", "memory", "hog", "fill", "exit", "segfault", "hang", "wait", "until_stop", "nan"]


def _wait_for(path, context=None):
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        if context is not None and context.should_stop:
            return
        time.sleep(0.01)


class Probe(BaseModel):
    @staticmethod
    def get_knob_config():
        return {
            "mode": CategoricalKnob(MODES),
            "x": FloatKnob(0.0, 1.0),
            "quick": PolicyKnob("EARLY_STOP"),
        }

    def train(self, dataset_path, shared_params=None, *, target="y", signal_dir=None, seed=None, **options):
        data = read_tabular(dataset_path, target=target)
        draw = int(np.random.randint(2**31))
        threads = os.environ.get("OMP_NUM_THREADS")
        blas = max((pool["num_threads"] for pool in threadpool_info()), default=0)  # numpy's, loaded already
        limit = resource.getrlimit(resource.RLIMIT_DATA)
        memory = "/".join("none" if v == resource.RLIM_INFINITY else str(v // 2**20) for v in limit)  # soft/hard MiB
        pid = os.environ.get("_BAOBAB_HOST_PID", os.getpid())  # as the platform knows it: 2 in its PID namespace
        print(
            f"probe pid={pid} imports={IMPORTS} data={id(data)} seed={seed} draw={draw} threads={threads} "
            f"blas={blas} memory_mb={memory}"
        )
        sys.stderr.write("progress 10%\rprogress 100%\n")
        self.context.report(1, loss=0.5, accuracy=float("nan"))
        self.context.log("step one done")
        mode = self.knobs["mode"]
        x = self.knobs["x"]
        if mode == "raise":
            raise ValueError(f"x={x} is a bad value")
        if mode == "memory":
            raise MemoryError("cannot allocate 1 TB")
        if mode == "forgetful":  # state that dump_parameters() leaves out
            self.offset = 1.0
        if mode == "hog":  # 2x GiB, for real
            self.hoard = np.ones(int(x * 2**31), dtype=np.uint8)
        if mode == "fill":  # the data limit but x GiB, for real, whatever the process held already (its libraries')
            soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
            held = int(open("/proc/self/status").read().split("VmData:")[1].split()[0]) * 1024
            self.hoard = np.ones(soft - held - int(x * 2**30), dtype=np.uint8)
            print(f"filled data_mb={(held + self.hoard.nbytes) // 2**20} held_mb={held // 2**20}")
        if mode == "exit":
            print("about to exit", flush=True)
            os._exit(3)
        if mode == "segfault":
            ctypes.string_at(0)
        if mode == "hang":
            while True:
                time.sleep(0.05)
        if mode == "wait":
            open(os.path.join(signal_dir, f"started-{x}"), "w").close()
            _wait_for(os.path.join(signal_dir, f"go-{x}"))
        if mode == "until_stop":
            open(os.path.join(signal_dir, f"started-{x}"), "w").close()
            while not self.context.should_stop:
                time.sleep(0.01)
            self.context.log(f"stopping: {self.context.stop_reason}")

    def evaluate(self, dataset_path):
        return float("nan") if self.knobs["mode"] == "nan" else self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] + getattr(self, "offset", 0.0) for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]]), "mode": self.knobs["mode"]}

    def load_parameters(self, params):
        self.knobs["x"] = float(params["x"][0])
