"""A hostile template: it leaves a daemon behind, and looks for the platform's processes.

What ``train()`` does is up to its train args (the knobs are an advisor's to pick):

- ``lock``: :func:`start_daemon` double-forks a ``setsid()``
  daemon that holds an ``flock`` on the file ``lock`` (its pid written in it) and sleeps;
  ``train()`` returns once it holds the lock. A test sees it alive while the lock is held:
  a pid would not do, inside a PID namespace it names another process outside.
  ``predict()`` does the same for each query that is a string (the lock's path).
- ``server_pid``: reads ``/proc/<server_pid>/environ`` and
  ``cmdline`` and signals the pid (signal 0: the permission check, nothing delivered);
  logs ``hostile <what>: <outcome>`` lines, the outcome ``ok`` or the exception's name.
  ``server_pids``: the same for each pid, logged as ``hostile <what> <pid>: <outcome>``.
- ``read``: paths to read (a folder is listed), ``write``: files to create; logs
  ``hostile read <path>: <outcome>`` and ``hostile write <path>: <outcome>`` lines.
- ``mkstemp``: makes (and removes) a temporary file with :func:`tempfile.mkstemp`; logs
  ``hostile mkstemp: ok in <its folder>``, or the exception's name.

The score is the ``x`` knob.
"""

import fcntl
import os
import tempfile
import time

import numpy as np

from baobab.model import BaseModel, CategoricalKnob, FloatKnob, PolicyKnob

MODES = ["hostile"]


def start_daemon(lock_path):
    """Leave a double-forked session leader behind; return once it holds its lock."""
    ready_r, ready_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, str(os.getpid()).encode())
            os.write(ready_w, b"!")
            while True:
                time.sleep(60)
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.close(ready_r)
    os.waitpid(middle, 0)


def snoop(server_pid, named=False):
    """What this process can do to the process ``server_pid``: one line per attempt (``named``: with the pid)."""
    lines = []
    pid = f" {server_pid}" if named else ""
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{server_pid}/{what}", "rb") as f:
                f.read()
            lines.append(f"hostile {what}{pid}: ok")
        except OSError as e:
            lines.append(f"hostile {what}{pid}: {type(e).__name__}")
    try:
        os.kill(server_pid, 0)
        lines.append(f"hostile kill{pid}: ok")
    except OSError as e:
        lines.append(f"hostile kill{pid}: {type(e).__name__}")
    return lines


def touch(read=(), write=()):
    """What this process can do to the paths: read them (a folder is listed) or create them, one line each."""
    lines = []
    for path in read:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as f:
                    f.read(1)
            lines.append(f"hostile read {path}: ok")
        except OSError as e:
            lines.append(f"hostile read {path}: {type(e).__name__}")
    for path in write:
        try:
            with open(path, "w") as f:
                f.write("planted by a template")
            lines.append(f"hostile write {path}: ok")
        except OSError as e:
            lines.append(f"hostile write {path}: {type(e).__name__}")
    return lines


def make_temporary_file():
    """Whether this process can make a temporary file, and where (one line)."""
    try:
        fd, path = tempfile.mkstemp()
        os.write(fd, b"scratch")
        os.close(fd)
        os.unlink(path)
        return f"hostile mkstemp: ok in {os.path.dirname(os.path.realpath(path))}"
    except OSError as e:
        return f"hostile mkstemp: {type(e).__name__}"


class Hostile(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"mode": CategoricalKnob(MODES), "x": FloatKnob(0.0, 1.0), "quick": PolicyKnob("EARLY_STOP")}

    def train(
        self,
        dataset_path,
        shared_params=None,
        *,
        lock=None,
        server_pid=None,
        server_pids=(),
        read=(),
        write=(),
        mkstemp=False,
        **_,
    ):
        if lock is not None:
            start_daemon(lock)
            self.context.log("hostile daemon started")
        lines = [] if server_pid is None else snoop(int(server_pid))
        for pid in server_pids:
            lines += snoop(int(pid), named=True)
        if mkstemp:
            lines.append(make_temporary_file())
        for line in lines + touch(read, write):
            self.context.log(line)

    def evaluate(self, dataset_path):
        return self.knobs["x"]

    def predict(self, queries):
        for query in queries:
            if isinstance(query, str):
                start_daemon(query)
        return [self.knobs["x"] for _ in queries]

    def dump_parameters(self):
        return {"x": np.array([self.knobs["x"]])}

    def load_parameters(self, params):
        self.knobs["x"] = float(params["x"][0])
