"""The long-lived worker process of the local executor: ``python -m baobab.worker._process``.

:class:`~baobab.worker.LocalExecutor` starts it with two pipes (file descriptors given
as arguments) and the settings in its environment (``BAOBAB_*``, read by
:meth:`Settings.from_env`); its stdout and stderr are a log file under
``settings.home / "logs"``. It runs one trial at a time with :func:`run_trial`, and
keeps its caches (imported templates, fetched and decoded datasets) from trial to
trial and job to job.

Messages are JSON objects, one per :class:`multiprocessing.connection.Connection`
message:

- executor → worker: ``{"op": "run", "trial": N}``; ``{"op": "stop", "trial": N,
  "reason": "..."}`` asks trial N (running, or the next to run) to stop early.
- worker → executor: ``{"op": "ready", "pid": P}`` once it can run trials;
  ``{"op": "done", "trial": N, "status": "COMPLETED"}`` once trial N's outcome is
  stored (``status`` is what the trial is now, null if it does not exist);
  ``{"op": "failed", "trial": N, "error": "..."}`` when the worker could not run it
  (the database failed).

A control thread reads the executor's messages while the main thread runs a trial,
so a stop request reaches the running trial's context at once. The end of the
command pipe means the executor is gone: the worker exits at once.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import queue
import socket
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from baobab import Settings
from baobab.model import TrialContext
from baobab.worker._runner import WorkerResources, run_trial

__all__ = ["main"]

logger = logging.getLogger("baobab.worker")

#: The exit status of a worker whose executor went away.
_ORPHANED = 70


class _Worker:
    def __init__(self, commands: Connection, replies: Connection, resources: WorkerResources) -> None:
        self._commands = commands
        self._replies = replies
        self._resources = resources
        self._jobs: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: tuple[int, TrialContext] | None = None
        self._waiting: set[int] = set()  # received, not started
        self._early_stops: dict[int, str] = {}

    def serve(self) -> None:
        threading.Thread(target=self._listen, name="baobab-worker-control", daemon=True).start()
        self._send(op="ready", pid=os.getpid())
        while True:
            self._run(self._jobs.get())

    def _run(self, trial_id: int) -> None:
        context = TrialContext()
        with self._lock:
            self._running = (trial_id, context)
            self._waiting.discard(trial_id)
            reason = self._early_stops.pop(trial_id, None)
        if reason is not None:
            context.request_stop(reason)
        try:
            outcome = run_trial(trial_id, self._resources, context=context)
        except Exception as e:
            logger.exception("trial %d: the worker could not run it", trial_id)
            reply: dict[str, Any] = {"op": "failed", "trial": trial_id, "error": f"{type(e).__name__}: {e}"}
        else:
            status = None if outcome.status is None else outcome.status.value
            reply = {"op": "done", "trial": trial_id, "status": status}
        finally:
            with self._lock:
                self._running = None
        self._send(**reply)

    def _listen(self) -> None:
        while True:
            try:
                message = json.loads(self._commands.recv_bytes())
            except (EOFError, OSError):
                # The executor is gone: nobody will read a result or stop us. The trial
                # row stays RUNNING; whoever restarts the platform finds it lost.
                os._exit(_ORPHANED)
            if message["op"] == "run":
                with self._lock:
                    self._waiting.add(int(message["trial"]))
                self._jobs.put(int(message["trial"]))
            elif message["op"] == "stop":
                self._stop(int(message["trial"]), str(message["reason"]))

    def _stop(self, trial_id: int, reason: str) -> None:
        with self._lock:
            if self._running is not None and self._running[0] == trial_id:
                self._running[1].request_stop(reason)
            elif trial_id in self._waiting:
                self._early_stops[trial_id] = reason
            # else: finished already (the request crossed its "done"); nothing to stop

    def _send(self, **message: Any) -> None:
        try:
            self._replies.send_bytes(json.dumps(message).encode())
        except OSError:
            os._exit(_ORPHANED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baobab.worker._process")
    parser.add_argument("--commands", type=int, required=True, help="file descriptor to read commands from")
    parser.add_argument("--replies", type=int, required=True, help="file descriptor to write replies to")
    parser.add_argument("--index", type=int, required=True, help="the worker's slot in its executor")
    args = parser.parse_args(argv)
    # Whole lines reach the log file at once: a crash report quotes its last lines.
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # A segfault in a template's C code dumps the Python stack to the log: the crash report quotes it.
    faulthandler.enable(all_threads=False)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
    )
    for fd in (args.commands, args.replies):
        os.set_inheritable(fd, False)  # templates' own subprocesses must not hold our pipes
    commands = Connection(args.commands, writable=False)
    replies = Connection(args.replies, readable=False)
    settings = Settings.from_env()
    name = f"{socket.gethostname()}:local-{args.index}:{os.getpid()}"
    resources = WorkerResources.from_settings(settings, name=name)
    logger.info("worker %s ready", name)
    _Worker(commands, replies, resources).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
