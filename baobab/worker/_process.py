"""The long-lived process that runs templates for a worker: ``python -m baobab.worker._process``.

:class:`~baobab.worker.LocalExecutor` starts it for each of its slots, and a Celery
pool process (:mod:`baobab.worker._celery`) for the trials it is handed, each as a
:class:`~baobab.worker._spawn.WorkerProcess` (a template process: its own PID
namespace), with two pipes (file descriptors given as arguments), the admin API's URL
and its confinement, in an environment with none of the platform's settings nor any
other variable of its starter's (:func:`baobab._sandbox.template_env`); its stdout and
stderr are a log file under ``settings.home / "logs"``. Its memory is limited to one trial
slot's share until its first unit of work fixes its launch's (:mod:`baobab.worker._memory`).
It runs one unit of work at a time with :func:`run_trials` (a trial, or the members of a fused group trained together),
reporting through the admin API with each trial's token, through which it also reads
the trial's inputs and stores its parameters (it holds no artifact URL), and keeps its
caches (imported templates, fetched and decoded datasets) from trial to trial. For a
Celery pool process (``--heartbeat-s``) it beats for its trials itself, gives up a trial
past ``--time-limit-s`` that does not stop by exiting with status 75, and holds each
trial's outcome for the claim of the next one (:class:`~baobab.worker.FinishRelay`),
sending it before it exits.

A worker serves one launch (:class:`baobab.store.Launch`): one user, with the threads and
memory their job asks each launch to get. Its first trial says which: before it starts
any thread it confines itself (:func:`baobab._sandbox.confine`) to that user's folder
``<private root>/owner-<id>``, where its cache is, and away from the rest of the
platform's home (the database, the secret key, other users' artifacts), and fixes its
threads and memory limit (:func:`~baobab.worker._launch.take_launch`). The executor
sends it only that launch's trials afterwards, and replaces it to serve another.

Messages are JSON objects, one per :class:`multiprocessing.connection.Connection`
message:

- executor → worker: ``{"op": "run", "trials": [N, ...], "tokens": ["...", ...], "launch": {...}}``
  (one trial, or a fused group with a token per member; ``launch`` is :meth:`Launch.to_json
  <baobab.store.Launch.to_json>`);
  ``{"op": "stop", "trial": N, "reason": "..."}`` asks trial N (running, or the next
  to run) to stop early.
- worker → executor: ``{"op": "ready", "pid": P}`` once it can take its first trial;
  ``{"op": "done", "trial": N, "status": "COMPLETED", "ran": true, "phases": {"train": 1.5, ...}}``
  once trial N's outcome is stored (``status`` is what the trial is now, null if it does
  not exist; ``ran``: whether this worker ran it; ``phases``: its seconds per phase, for
  the executor's metrics), one per member of a group;
  (``retry_after_s``: the trial runs on a live worker, ask again after that long);
  ``{"op": "failed", "trial": N, "error": "...", "unreachable": true}`` when the worker
  could not run it (``unreachable``: the admin API could not be reached).

A control thread reads the executor's messages while the main thread runs a trial,
so a stop request reaches the running trial's context at once. The end of the
command pipe means the executor is gone, or lets the worker go: the worker sends the
outcome it holds, if any, and exits.
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
import tempfile
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from baobab._contained import host_pid
from baobab._http import api_session
from baobab._sandbox import Confinement, confine
from baobab.exceptions import StoreError
from baobab.model import TrialContext
from baobab.store import Launch
from baobab.worker._gateway import ApiGateway, FinishRelay
from baobab.worker._launch import take_launch
from baobab.worker._memory import limit_memory
from baobab.worker._runner import WorkerResources, run_trials

__all__ = ["main"]

logger = logging.getLogger("baobab.worker")

#: The exit status of a worker whose executor went away.
_ORPHANED = 70
#: The exit status of a worker that gave up a trial which would not stop (its time ran out, or its claim).
OVERRUN_EXIT = 75


class _Worker:
    def __init__(
        self,
        commands: Connection,
        replies: Connection,
        *,
        name: str,
        api_url: str,
        confinement: Confinement,
        data_cache_mb: int,
        memory_mb: int,
        heartbeat_s: float | None = None,
        time_limit_s: float | None = None,
        relay: FinishRelay | None = None,
    ) -> None:
        self._commands = commands
        self._replies = replies
        self._name = name
        self._api_url = api_url
        self._confinement = confinement
        self._data_cache_mb = data_cache_mb
        self._memory_mb = memory_mb
        self._heartbeat_s = heartbeat_s
        self._time_limit_s = time_limit_s
        self._relay = relay
        self._http = api_session()
        self._resources: WorkerResources | None = None
        self._launch: Launch | None = None
        self._tokens: dict[int, str] = {}
        self._jobs: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: dict[int, TrialContext] = {}
        self._waiting: set[int] = set()  # received, not started
        self._early_stops: dict[int, str] = {}

    def serve(self) -> None:
        self._send(op="ready", pid=host_pid())
        first = self._receive()
        if first.get("op") != "run":
            raise RuntimeError(f"the first message must be a trial to run, got {first!r}")
        self._bind(Launch.from_json(first["launch"]))
        self._take(first)
        threading.Thread(target=self._listen, name="baobab-worker-control", daemon=True).start()
        while True:
            self._run(self._jobs.get())

    def _bind(self, launch: Launch) -> None:
        """Serve ``launch`` from now on: confine this process to its user's folder, before any thread starts,
        and fix its threads and memory."""
        private = self._confinement.private / f"owner-{launch.owner}"  # type: ignore[operator]
        confined = confine(self._confinement.with_private(private))
        os.environ.update(HOME=str(private), TMPDIR=str(private / "tmp"))
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again
        threads, memory_mb = take_launch(launch, memory_mb=self._memory_mb)
        self._launch = launch
        self._resources = WorkerResources(
            cache_dir=private / "cache", name=self._name, data_cache_mb=self._data_cache_mb
        )
        logger.info(
            "worker %s serves user %d with %s threads and %d MiB (disk confined: %s)",
            self._name,
            launch.owner,
            "the slot's" if threads is None else threads,
            memory_mb,
            confined,
        )

    def _take(self, message: dict[str, Any]) -> None:
        trial_ids = [int(trial_id) for trial_id in message["trials"]]
        launch = Launch.from_json(message["launch"])
        if launch != self._launch:
            # The executor never does this; a worker of one launch refuses another's trial all the same.
            for trial_id in trial_ids:
                self._send(op="failed", trial=trial_id, error=f"this worker serves {self._launch} only")
            return
        with self._lock:
            self._waiting.update(trial_ids)
            self._tokens.update(zip(trial_ids, map(str, message["tokens"]), strict=True))
        self._jobs.put(trial_ids)

    def _receive(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self._commands.recv_bytes()))
        except (EOFError, OSError):
            # The executor is gone, or lets us go: nobody will read a result or stop us. A
            # running trial's row stays RUNNING; whoever restarts the platform finds it lost.
            self._send_held()
            os._exit(_ORPHANED)

    def _run(self, trial_ids: list[int]) -> None:
        contexts = [TrialContext() for _ in trial_ids]
        with self._lock:
            self._running = dict(zip(trial_ids, contexts, strict=True))
            self._waiting.difference_update(trial_ids)
            reasons = [self._early_stops.pop(trial_id, None) for trial_id in trial_ids]
        for context, reason in zip(contexts, reasons, strict=True):
            if reason is not None:
                context.request_stop(reason)
        assert self._resources is not None  # bound before the first trial
        gateways = [
            ApiGateway(
                self._api_url,
                trial_id,
                self._tokens.pop(trial_id),
                heartbeat_s=self._heartbeat_s,
                session=self._http,
                relay=self._relay,
            )
            for trial_id in trial_ids
        ]
        try:
            outcomes = run_trials(
                trial_ids,
                self._resources,
                gateways=gateways,
                contexts=contexts,
                time_limit_s=self._time_limit_s,
                on_overrun=None if self._heartbeat_s is None else _give_up,
            )
        except Exception as e:
            logger.exception("trials %s: the worker could not run them", trial_ids)
            error = f"{type(e).__name__}: {e}"
            unreachable = isinstance(e, StoreError)
            replies: list[dict[str, Any]] = [
                {"op": "failed", "trial": i, "error": error, "unreachable": unreachable} for i in trial_ids
            ]
        else:
            replies = [
                {
                    "op": "done",
                    "trial": o.trial_id,
                    "status": None if o.status is None else o.status.value,
                    "ran": o.ran,
                    "phases": o.phases,
                    "retry_after_s": o.retry_after_s,
                }
                for o in outcomes
            ]
        finally:
            with self._lock:
                self._running = {}
        for reply in replies:
            self._send(**reply)

    def _listen(self) -> None:
        while True:
            message = self._receive()
            if message["op"] == "run":
                self._take(message)
            elif message["op"] == "stop":
                self._stop(int(message["trial"]), str(message["reason"]))

    def _stop(self, trial_id: int, reason: str) -> None:
        with self._lock:
            if trial_id in self._running:
                self._running[trial_id].request_stop(reason)
            elif trial_id in self._waiting:
                self._early_stops[trial_id] = reason
            # else: finished already (the request crossed its "done"); nothing to stop

    def _send(self, **message: Any) -> None:
        try:
            self._replies.send_bytes(json.dumps(message).encode())
        except OSError:
            self._send_held()
            os._exit(_ORPHANED)

    def _send_held(self) -> None:
        """Send the outcome the relay holds for a next claim that will not come."""
        if self._relay is not None:
            try:
                self._relay.flush()
            except StoreError as e:  # the trial is left to the heartbeat rules
                logger.warning("%s", e)


def _give_up() -> None:
    """A trial does not stop, past its time limit or no longer ours: exit, and its starter goes on."""
    os._exit(OVERRUN_EXIT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baobab.worker._process")
    parser.add_argument("--commands", type=int, required=True, help="file descriptor to read commands from")
    parser.add_argument("--replies", type=int, required=True, help="file descriptor to write replies to")
    parser.add_argument("--index", type=int, required=True, help="the worker's slot in its executor")
    parser.add_argument("--api-url", required=True, help="the admin API that trials report to")
    parser.add_argument("--confinement", required=True, help="JSON: the protected paths and the private root")
    parser.add_argument("--memory-mb", type=int, required=True, help="a launch's memory limit, asking none")
    parser.add_argument("--most-memory-mb", type=int, help="the most memory a launch may get (default: --memory-mb)")
    parser.add_argument("--data-cache-mb", type=int, required=True, help="the budget of the shared dataset cache")
    parser.add_argument("--name", help="how trials name this worker (by default host:local-<index>:<pid>)")
    parser.add_argument("--heartbeat-s", type=float, help="beat for each trial this often (nobody watches us)")
    parser.add_argument("--time-limit-s", type=float, help="with --heartbeat-s: a trial's time limit")
    parser.add_argument("--finish-wait-s", type=float, help="with --heartbeat-s: how long an outcome waits for a claim")
    args = parser.parse_args(argv)
    limit_memory(args.memory_mb, most_mb=args.most_memory_mb)
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
    name = args.name or f"{socket.gethostname()}:local-{args.index}:{host_pid()}"  # getpid() is 2 in its namespace
    confinement = Confinement.from_json(args.confinement)
    if confinement.private is None:
        parser.error("--confinement needs a private root: the folder of the users' folders")
    logger.info("worker %s ready", name)
    relay = FinishRelay(args.finish_wait_s) if args.heartbeat_s is not None and args.finish_wait_s else None
    worker = _Worker(
        commands,
        replies,
        name=name,
        api_url=args.api_url,
        confinement=confinement,
        data_cache_mb=args.data_cache_mb,
        memory_mb=args.memory_mb,
        heartbeat_s=args.heartbeat_s,
        time_limit_s=args.time_limit_s if args.heartbeat_s is not None else None,
        relay=relay,
    )
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
