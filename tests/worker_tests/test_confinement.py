"""What a template process may reach: its own threads' names in /proc, no other process, and nothing after it ends.

CUDA names the threads it starts with ``pthread_setname_np``, which opens
``/proc/self/task/<tid>/comm`` to write and truncate; where Landlock refused that, ``cuInit``
failed with "OS call failed" (error 304) and every trial of a GPU worker ran on the CPU.
Each check runs in a fresh process, since confinement cannot be undone.

The hostile template (templates/hostile.py) leaves a double-forked ``setsid()`` daemon behind
in a trial, in an inference worker and in the upload check, and looks for the server's
process: the daemon ends with what started it (see :mod:`baobab._contained`), and the
server's process is out of sight. It writes into ``/tmp`` and ``/var/tmp``, which every user's
templates would share: refused, while :mod:`tempfile` works in its own folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import runpy
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from worker_world import TEMPLATES, Platform

from baobab._contained import ProcessGroup, how_it_ended
from baobab._sandbox import Confinement, landlock_available
from baobab.admin._template_check import check_template_in_process
from baobab.store import ArtifactStore, EventKind, LocalEventChannel, TrialState, params_to_bytes
from baobab.testing import missing_part, wait_until
from baobab.worker import InferenceSpec, InferenceWorker, LocalExecutor

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


# -- what a template's processes can reach, and how long they live ----------------------------------------------------

HOSTILE = TEMPLATES / "hostile.py"


def _held(lock: Path) -> bool:
    """Whether a process holds the ``flock`` of ``lock``: the hostile template's daemon is alive."""
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def _daemon_started(lock: Path) -> None:
    assert lock.read_text().isdigit(), "the daemon wrote no pid"


@pytest.fixture
def executor(platform: Platform) -> Iterator[tuple[LocalExecutor, Any]]:
    events = LocalEventChannel()
    finished = events.subscribe(EventKind.TRIAL_FINISHED)
    executor = LocalExecutor(platform.settings, events, api_url=platform.api_url, workers=1)
    yield executor, finished
    executor.close()


def _run_trial(platform: Platform, executor: tuple[LocalExecutor, Any], **train_args: Any) -> int:
    local, finished = executor
    trial_id = platform.add_trial("hostile", 0.5, file="hostile.py", train_args=train_args)
    local.submit(trial_id)
    event = finished.get(120.0)
    assert event is not None and event.id == trial_id, "the trial did not finish"
    assert platform.trial(trial_id).status is TrialState.COMPLETED, platform.logs(trial_id)
    return trial_id


def test_a_daemon_a_trial_leaves_behind_ends_with_the_trial_not_with_its_worker(
    platform: Platform, executor: tuple[LocalExecutor, Any]
) -> None:
    lock = platform.signal_dir / "daemon.lock"
    first = _run_trial(platform, executor, lock=str(lock))
    assert "hostile daemon started" in platform.logs(first)
    _daemon_started(lock)
    wait_until(lambda: not _held(lock), what="the trial's daemon to end with its trial")
    # the worker that ran it is still there: the next trial of its user runs in the same process
    (worker,) = {platform.trial(first).worker}
    second = _run_trial(platform, executor, lock=str(platform.signal_dir / "second.lock"))
    assert platform.trial(second).worker == worker


def test_a_trial_can_neither_read_nor_signal_the_server_process(
    platform: Platform, executor: tuple[LocalExecutor, Any]
) -> None:
    snoop = runpy.run_path(str(HOSTILE))["snoop"]
    here = snoop(os.getpid())
    assert here == ["hostile environ: ok", "hostile cmdline: ok", "hostile kill: ok"]  # the probe works unconfined
    trial_id = _run_trial(platform, executor, server_pid=os.getpid())
    lines = [line for line in platform.logs(trial_id) if line.startswith("hostile ")]
    assert [line.split(":")[0] for line in lines] == ["hostile environ", "hostile cmdline", "hostile kill"]
    assert not [line for line in lines if line.endswith(": ok")], lines


def test_a_trial_writes_nothing_in_the_shared_tmp_and_makes_its_temporary_files_in_its_own_folder(
    platform: Platform, executor: tuple[LocalExecutor, Any]
) -> None:
    """``/tmp`` and ``/var/tmp`` are shared by every user's templates: closed to them, while :mod:`tempfile`
    (which honours ``TMPDIR``) makes its files in the trial's private folder."""
    if not landlock_available():
        missing_part("this kernel has no Landlock: nothing is confined to check")
    planted = [f"/tmp/planted-{uuid.uuid4().hex}", f"/var/tmp/planted-{uuid.uuid4().hex}"]
    trial_id = _run_trial(platform, executor, write=planted, mkstemp=True)
    lines = [line for line in platform.logs(trial_id) if line.startswith("hostile ")]
    assert [line for line in lines if line.startswith("hostile write")] == [
        f"hostile write {path}: PermissionError" for path in planted
    ]
    assert not [path for path in planted if Path(path).exists()]
    (made,) = [line for line in lines if line.startswith("hostile mkstemp")]
    private = platform.settings.home / "workers" / f"owner-{platform.owner_id}"
    assert made == f"hostile mkstemp: ok in {os.path.realpath(private / 'tmp')}"


def test_an_inference_worker_takes_the_daemons_of_its_template_with_it(tmp_path: Path, signal_dir: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    data = HOSTILE.read_bytes()
    checksum = hashlib.sha256(data).hexdigest()
    store.put_bytes(f"templates/{checksum}.py", data)
    store.put_bytes("params/trial-1.safetensors", params_to_bytes({"x": np.array([0.25])}))
    spec = InferenceSpec(
        trial_id=1,
        artifacts_url=store.url,
        template_key=f"templates/{checksum}.py",
        template_checksum=checksum,
        class_name="Hostile",
        knobs={"mode": "hostile", "x": 0.25, "quick": False},
        params_key="params/trial-1.safetensors",
        cache_dir=str(tmp_path / "cache"),
        confinement=Confinement((Path(store.url),), private=tmp_path / "private").to_json(),
    )
    worker = InferenceWorker(spec, log_path=tmp_path / "worker.log")
    lock = signal_dir / "daemon.lock"
    try:
        worker.start(timeout=60)
        assert worker.predict([str(lock)], timeout=60) == [0.25]
        _daemon_started(lock)
        assert _held(lock)  # it lives while its worker does
    finally:
        worker.close()
    wait_until(lambda: not _held(lock), what="the daemon to end with its inference worker")


def test_the_upload_check_takes_the_daemons_of_the_template_with_it(tmp_path: Path, signal_dir: Path) -> None:
    lock = signal_dir / "daemon.lock"
    template = tmp_path / "hostile_on_import.py"
    template.write_text(HOSTILE.read_text() + f"\n\nstart_daemon({str(lock)!r})  # on import: the check runs it\n")
    config = check_template_in_process(template, "Hostile", "TABULAR_CLASSIFICATION", timeout_s=60)
    assert set(config) == {"mode", "x", "quick"}
    _daemon_started(lock)
    wait_until(lambda: not _held(lock), what="the daemon to end with the upload check")


# -- the process group every child is (a predictor, and under its launcher every template process) -------------------

STUBBORN = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == "ignore" else signal.SIG_DFL)
IGNORING = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", IGNORING])
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(
    ("on_term", "ended"), [("die", "was killed by signal SIGTERM"), ("ignore", "was killed by signal SIGKILL")]
)
def test_a_process_group_stops_with_every_process_in_it(on_term: str, ended: str) -> None:
    group = ProcessGroup([sys.executable, "-c", STUBBORN, on_term], stdout=subprocess.PIPE)
    assert group.stdout is not None
    child = int(group.stdout.readline())
    assert os.getpgid(child) == group.pid  # the child is in the group, not in this process's
    returncode = group.stop(grace_s=1.0)
    group.stdout.close()
    assert how_it_ended(returncode) == ended
    assert group.stop(grace_s=1.0) == returncode  # stopping it again changes nothing
    # the child ignored SIGTERM: it ended by the group's SIGKILL (it is the init's to reap, so it is looked for as gone
    # or a zombie)
    wait_until(lambda: not _alive(child), what="the group's other process to end")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_how_a_process_ended_is_said_in_words() -> None:
    assert how_it_ended(0) == "exited with status 0"
    assert how_it_ended(3) == "exited with status 3"
    assert how_it_ended(-9) == "was killed by signal SIGKILL"
    assert how_it_ended(-200) == "was killed by signal 200"
