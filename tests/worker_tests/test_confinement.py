"""A confined template process may name its own threads, as CUDA's driver does, and nothing more in /proc.

CUDA names the threads it starts with ``pthread_setname_np``, which opens
``/proc/self/task/<tid>/comm`` to write and truncate; where Landlock refused that, ``cuInit``
failed with "OS call failed" (error 304) and every trial of a GPU worker ran on the CPU.
Each check runs in a fresh process, since confinement cannot be undone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from baobab._sandbox import landlock_available
from baobab.testing import missing_part

PROBE = r"""
import ctypes, json, os, sys, threading
from baobab._sandbox import Confinement, confine

libc = ctypes.CDLL(None)
libc.pthread_setname_np.argtypes = [ctypes.c_ulong, ctypes.c_char_p]
release = threading.Event()
started = threading.Event()
def worker():
    started.set()
    release.wait()
thread = threading.Thread(target=worker)
thread.start()
started.wait()
confined = confine(Confinement.from_json(sys.argv[1]))
outcome = {"confined": confined}
# another thread's name: glibc writes it through /proc/self/task/<tid>/comm
outcome["setname"] = libc.pthread_setname_np(thread.ident, b"cuda-evthandlr")
with open(f"/proc/self/task/{thread.native_id}/comm") as f:
    outcome["name"] = f.read().strip()
for key, path in (("own_comm", "/proc/self/comm"), ("parent_comm", f"/proc/{os.getppid()}/task/{os.getppid()}/comm")):
    try:
        with open(path, "w") as f:
            f.write("renamed")
        outcome[key] = "written"
    except OSError as e:
        outcome[key] = type(e).__name__
release.set()
thread.join()
print(json.dumps(outcome))
"""


def test_a_confined_process_names_its_own_threads_and_writes_no_other_proc_file(tmp_path: Path) -> None:
    if not landlock_available():
        missing_part("this kernel has no Landlock: nothing is confined to check")
    (protected := tmp_path / "home").mkdir()
    confinement = json.dumps({"protected": [str(protected)], "private": str(protected / "private"), "readable": []})
    result = subprocess.run(
        [sys.executable, "-c", PROBE, confinement], capture_output=True, text=True, timeout=60, env={**os.environ}
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["confined"] is True
    assert outcome["setname"] == 0, f"pthread_setname_np failed with errno {outcome['setname']}"
    assert outcome["name"] == "cuda-evthandlr"
    # the rest of /proc stays read-only: its own process's name, and any thread of another process
    assert outcome["own_comm"] == "PermissionError"
    assert outcome["parent_comm"] == "PermissionError"
