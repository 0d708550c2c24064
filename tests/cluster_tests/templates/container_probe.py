"""A template that reports what a trial finds in its container: who it runs as, where it can write, and
which capabilities it holds. Each finding is a trial log line ``probe <what>: <outcome>``.

It tries the root filesystem (``/`` and the platform's own code under ``/opt/baobab``), ``/tmp``,
the folder it is started in and ``TMPDIR`` (its own, where :mod:`tempfile` makes files); the outcome
of a write is ``ok`` or the error's code (``EROFS``: a read-only filesystem, ``EACCES``: no permission).
The score is the ``x`` knob.
"""

import errno
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from baobab.model import BaseModel, FloatKnob


def _write(folder):
    try:
        with tempfile.NamedTemporaryFile(dir=folder):
            return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)


class ContainerProbe(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"x": FloatKnob(0.0, 1.0)}

    def train(self, dataset_path, shared_params=None, **train_args):
        log = self.context.log
        log(f"probe uid: {os.getuid()}")
        for folder in ("/", Path(sys.prefix), "/tmp", Path.cwd()):
            log(f"probe write {folder}: {_write(folder)}")
        log(f"probe write TMPDIR: {_write(None)}")  # tempfile's own choice: TMPDIR
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        for field in ("CapEff", "CapBnd", "NoNewPrivs"):
            log(f"probe {field}: {status[field].strip()}")

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        self.knobs["x"] = float(params["x"][0])
