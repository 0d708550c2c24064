"""The local executor: trials in worker processes on this machine (``baobab up``).

:class:`LocalExecutor` owns N long-lived worker processes (:mod:`baobab.worker._process`)
and a FIFO queue of submitted units of work: a trial, or a fused group of trials, which
one worker runs in one process (:func:`~baobab.worker.run_trials`). A unit goes to the
first idle worker; the worker stores each trial's outcome itself and answers "done" (with the times of its phases,
which the executor records for the API's ``/metrics``: :mod:`baobab.worker._telemetry`). The executor handles what a
worker cannot report about itself, each time writing the final state first
(conditionally: only a PENDING or RUNNING trial changes) and then killing or
respawning what is needed:

- a worker still busy when its trial's time limit (``settings.trial_timeout_s``)
  passes is killed with its process group: the trial is ERRORED "exceeded the
  per-trial time limit of N s";
- a worker that dies mid-trial (a crash, ``os._exit``, SIGKILL from the OOM killer):
  the trial is ERRORED with how the process ended and the last lines of its log. A
  fused group's unfinished members are requeued instead (PENDING again, out of their
  group), each as a unit of its own: alone, a member that crashes its process ends
  ERRORED, and the others are not held to account for it;
- :meth:`LocalExecutor.cancel` drops a queued trial, or kills the worker running it;
  the trial is CANCELLED. A member of a running group is let go and asked to stop
  instead, so that its group-mates train on.

A killed or dead worker is replaced at once (a worker that dies before it is ready is
retried with a growing delay). After every final state, whoever wrote it, the executor
publishes ``Event(TRIAL_FINISHED, trial_id)``, once per submitted trial, after the
trial has left :meth:`LocalExecutor.active`.

One supervisor thread does the bookkeeping. It sleeps in
:func:`multiprocessing.connection.wait` on the workers' reply pipes, their pidfds and a
wake-up pipe, with the next deadline as timeout: nothing polls. :meth:`submit`,
:meth:`request_stop` and :meth:`cancel` act at once from the caller's thread (a
submitted trial is sent to an idle worker before ``submit`` returns), under the same
lock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from multiprocessing.connection import wait
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from baobab._sandbox import Confinement, protected_paths, template_env
from baobab.exceptions import StoreError
from baobab.store import (
    LIVE_S,
    Event,
    EventChannel,
    EventKind,
    Launch,
    TrialState,
    create_engine_from_url,
    drop_workers,
    end_trial,
    issue_trial_token,
    report_workers,
    requeue_trial,
    session_scope,
    trial_launch,
)
from baobab.worker._inventory import measure_inventory
from baobab.worker._memory import default_memory_mb, machine_memory_mb
from baobab.worker._spawn import WorkerProcess
from baobab.worker._telemetry import record_trial

if TYPE_CHECKING:
    from baobab import Settings

__all__ = ["LocalExecutor"]

logger = logging.getLogger("baobab.worker")

#: Without pidfds (not Linux), how often the supervisor checks that workers live.
_CHECK_INTERVAL_S = 0.5
#: Longest wait before retrying a worker that died while starting.
_MAX_BACKOFF_S = 30.0
#: After this many failed starts of every worker in a row, queued trials end ERRORED.
_MAX_START_FAILURES = 3


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _now() -> datetime:
    return datetime.now(UTC)


class LocalExecutor:
    """Runs trials in ``workers`` processes on this machine; a :class:`baobab.advisor.Executor`.

    Args:
        settings: where the database and artifacts are, ``home`` (worker logs go to
            ``home/logs``, downloaded artifacts to ``home/cache``) and
            ``trial_timeout_s`` (None: no limit).
        events: where ``TRIAL_FINISHED`` is published.
        workers: how many trials run at once; ``settings.cpu_slots`` by default. Each
            worker's numeric libraries get ``usable cores // workers`` threads (at least 1).
        engine: the engine for the executor's own writes; one is created by default.
        api_url: the admin API the workers report to (with each trial's token).

    Raises:
        ValueError: ``workers`` is not a positive integer.
        OSError: no worker process can be started.

    Thread-safe: the job driver submits from its thread, the API stops and cancels from
    request threads. Use it as a context manager, or call :meth:`close`.
    """

    #: Workers take trials straight from the executor's queue: nothing gains from submitting ahead.
    queue_ahead = 0

    def __init__(
        self,
        settings: Settings,
        events: EventChannel,
        *,
        api_url: str,
        workers: int | None = None,
        engine: Engine | None = None,
    ) -> None:
        count = settings.cpu_slots if workers is None else workers
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"workers={workers!r}: the local executor needs a positive number of worker processes")
        self._events = events
        self._engine = create_engine_from_url(settings.database_url) if engine is None else engine
        self._owns_engine = engine is None
        limit = settings.trial_timeout_s
        self._time_limit = float(limit) if limit else None  # None or 0: no limit
        self._log_dir = settings.home / "logs"
        #: The threads a launch gets that asks for none: its slot's share of the cores.
        self.slot_threads = max(1, _usable_cpus() // count)
        self._env = template_env(threads=self.slot_threads)
        self._api_url = api_url
        self._secret = settings.signing_key()
        protected = protected_paths(settings.home, settings.database_url, settings.artifacts_url)
        self._confinement = Confinement(protected, private=settings.home / "workers")
        memory_mb = settings.trial_memory_mb or default_memory_mb(settings.cpu_slots)
        #: What every worker process is started with: where to report, its confinement, its memory limit (the
        #: slot's share, and the room its launch may raise it to).
        self._worker_args = [
            *("--api-url", self._api_url),
            *("--confinement", self._confinement.to_json()),
            *("--memory-mb", str(memory_mb)),
            *("--most-memory-mb", str(max(memory_mb, machine_memory_mb()))),
            *("--data-cache-mb", str(settings.data_cache_mb)),
        ]
        self._launches: dict[int, Launch] = {}  # queued trial → its launch (the user whose job it is, resources)
        self._lock = threading.Lock()
        self._queue: deque[list[int]] = deque()  # units of work: a trial, or a fused group's members
        self._active: set[int] = set()
        self._stops: dict[int, str] = {}  # stop requests for queued trials
        self._workers: list[WorkerProcess | None] = [None] * count
        self._respawn_at = [0.0] * count
        self._start_failures = [0] * count
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        for index in range(count):
            self._spawn(index)
        if all(w is None for w in self._workers):
            self._release()
            raise OSError(f"cannot start worker processes; see the logs in {self._log_dir}")
        self._thread = threading.Thread(target=self._supervise, name="baobab-local-executor", daemon=True)
        self._thread.start()
        #: This machine as the admin API sees it (the store's ``workers``): kept fresh until the executor closes.
        self._node = f"{socket.gethostname()}:local:{os.getpid()}"
        self._inventory = measure_inventory(count, range(settings.gpus))
        self._stopping = threading.Event()
        self._reporter = threading.Thread(target=self._report_loop, name="baobab-local-inventory", daemon=True)
        self._reporter.start()

    # -- the Executor protocol ---------------------------------------------------------

    @property
    def slots(self) -> int:
        return len(self._workers)

    def submit(self, trials: int | Sequence[int]) -> None:
        """Queue the PENDING trial ``trials`` (or the members of a fused group, as one unit of work);
        it goes to a worker now if one is idle.

        Submitting a trial that is queued or running already does nothing.

        Raises:
            RuntimeError: the executor is closed.
        """
        unit = [trials] if isinstance(trials, int) else list(trials)
        launch = trial_launch(self._engine, unit[0])  # the members are trials of one job
        with self._lock:
            if self._closed:
                raise RuntimeError("the local executor is closed; create a new one to run trials")
            unit = [trial_id for trial_id in unit if trial_id not in self._active]
            if not unit:
                return
            self._active.update(unit)
            self._launches.update(dict.fromkeys(unit, launch))
            self._queue.append(unit)
            if self._dispatch() and self._time_limit is not None:
                self._wake()  # a new deadline

    def request_stop(self, trial_id: int, reason: str) -> None:
        """Ask the trial to stop early (``TrialContext.should_stop``); a queued one gets the request when it starts."""
        with self._lock:
            worker = self._worker_of(trial_id)
            if worker is not None:
                worker.send(op="stop", trial=trial_id, reason=reason)
            elif trial_id in self._active:
                self._stops[trial_id] = reason

    def cancel(self, trial_id: int, reason: str) -> None:
        """End the trial CANCELLED with ``reason``: dropped from the queue, or its worker killed (and replaced).

        A trial this executor does not hold is set CANCELLED too if it is still PENDING
        or RUNNING (an orphan of an earlier executor).
        """
        finished: list[int] = []
        with self._lock:
            worker = self._worker_of(trial_id)
            unit = next((u for u in self._queue if trial_id in u), None)
            if worker is not None and len(worker.trials) > 1:
                worker.trials.remove(trial_id)  # its group-mates train on; its answer is ignored
                worker.send(op="stop", trial=trial_id, reason=reason)
                self._end(trial_id, TrialState.CANCELLED, reason, None, finished)
            elif worker is not None:
                self._retire(worker, respawn_now=not self._closed)
                self._end(trial_id, TrialState.CANCELLED, reason, None, finished)
            elif unit is not None:
                unit.remove(trial_id)
                if not unit:
                    self._queue.remove(unit)
                self._end(trial_id, TrialState.CANCELLED, reason, None, finished)
            elif self._write(trial_id, TrialState.CANCELLED, reason, None):
                finished.append(trial_id)
            self._wake()  # a worker may have been replaced
        self._publish(finished)

    def active(self) -> set[int]:
        with self._lock:
            return set(self._active)

    def close(self) -> None:
        """Kill the workers and forget the queue, leaving those trials' rows as they are.

        Closing is what a platform shutdown does, and a shutdown is no verdict on a
        trial: the rows stay PENDING or RUNNING, and the next job driver finds them
        lost and runs them again (see :meth:`baobab.advisor.JobDriver.adopt`).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake()
        self._thread.join()
        self._stopping.set()
        self._reporter.join()
        with self._lock:
            for worker in self._workers:
                if worker is not None:
                    worker.kill()
            self._workers = [None] * len(self._workers)
            self._active.clear()
            self._queue.clear()
            self._release()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _report_loop(self) -> None:
        """Say what this machine has while the executor runs, and that it has gone when it closes."""
        while True:
            try:
                with session_scope(self._engine) as session:
                    if self._stopping.is_set():
                        drop_workers(session, [self._node])
                        return
                    report_workers(session, {self._node: self._inventory}, _now())
            except StoreError as e:
                logger.warning("cannot keep this machine's inventory in the store: %s", e)
                if self._stopping.is_set():
                    return
            self._stopping.wait(LIVE_S / 4)

    # -- bookkeeping (under the lock) ------------------------------------------------------

    def _worker_of(self, trial_id: int) -> WorkerProcess | None:
        return next((w for w in self._workers if w is not None and trial_id in w.trials), None)

    def _spawn(self, index: int) -> None:
        try:
            self._workers[index] = WorkerProcess(
                index,
                env=self._env,
                log_path=self._log_dir / f"worker-{index}.log",
                args=self._worker_args,
            )
        except OSError as e:
            logger.error("cannot start worker %d: %s", index, e)
            self._schedule_retry(index)

    def _schedule_retry(self, index: int) -> None:
        self._start_failures[index] += 1
        delay = min(_MAX_BACKOFF_S, 0.5 * 2 ** (self._start_failures[index] - 1))
        self._respawn_at[index] = time.monotonic() + delay

    def _retire(self, worker: WorkerProcess, *, respawn_now: bool) -> None:
        """Kill a worker and take it out of its slot (its trial is the caller's to end)."""
        worker.kill()
        self._workers[worker.index] = None
        self._respawn_at[worker.index] = time.monotonic()
        if respawn_now:
            self._spawn(worker.index)

    def _idle_worker(self, launch: Launch) -> WorkerProcess | None:
        """An idle worker that serves ``launch``, else one that serves nothing yet."""
        idle = [w for w in self._workers if w is not None and w.idle and w.launch in (launch, None)]
        return min(idle, key=lambda w: w.launch is None, default=None)

    def _dispatch(self) -> bool:
        """Send queued units, in order, to idle workers of their launches; True if any was sent.

        A worker serves one launch (it is confined to its user's folder, with its threads and
        memory). When trials wait and the only idle workers serve launches with nothing
        queued, those workers are replaced by fresh ones that will serve whoever comes first.
        """
        sent = False
        for unit in list(self._queue):
            launch = self._launches[unit[0]]
            worker = self._idle_worker(launch)
            if worker is None:
                continue
            worker.trials, worker.fused = list(unit), len(unit) > 1
            worker.deadline = None if self._time_limit is None else time.monotonic() + self._time_limit
            worker.log_offset = worker.log_size()
            tokens = [issue_trial_token(self._secret, trial_id) for trial_id in unit]
            if not worker.send(op="run", trials=unit, tokens=tokens, launch=launch.to_json()):
                worker.trials, worker.deadline = [], None
                continue  # the worker is gone; its death is handled below
            worker.launch = launch
            self._queue.remove(unit)
            for trial_id in unit:
                del self._launches[trial_id]
                reason = self._stops.pop(trial_id, None)
                if reason is not None:
                    worker.send(op="stop", trial=trial_id, reason=reason)
            sent = True
        starting = sum(1 for w in self._workers if w is None or (not w.ready and w.launch is None))
        waiting = len(self._queue) - starting
        for worker in list(self._workers):
            if waiting > 0 and worker is not None and worker.idle and worker.launch is not None:
                self._retire(worker, respawn_now=True)
                waiting -= 1
        return sent

    def _write(self, trial_id: int, status: TrialState, error: str | None, traceback: str | None) -> bool:
        """Store a final state if the trial is PENDING or RUNNING; True if it changed."""
        try:
            with session_scope(self._engine) as session:
                return end_trial(session, trial_id, status, now=_now(), error=error, traceback=traceback)
        except StoreError as e:
            logger.error("trial %d: cannot store %s (%s): %s", trial_id, status, error, e)
            return False

    def _end(
        self, trial_id: int, status: TrialState, error: str | None, traceback: str | None, finished: list[int]
    ) -> None:
        """Store a final state the executor decided, and let the trial go (published by the caller)."""
        self._write(trial_id, status, error, traceback)
        self._stops.pop(trial_id, None)
        self._launches.pop(trial_id, None)
        self._active.discard(trial_id)
        finished.append(trial_id)

    def _on_message(self, worker: WorkerProcess, message: dict[str, object], finished: list[int]) -> None:
        op = message.get("op")
        if op == "ready":
            worker.ready = True
            self._start_failures[worker.index] = 0
            return
        trial_id = message.get("trial")
        if not isinstance(trial_id, int) or trial_id not in worker.trials:
            return  # a reply about a trial this executor let go already (cancelled, timed out)
        worker.trials.remove(trial_id)
        if not worker.trials:
            worker.deadline = None
        if op == "failed":
            error = f"the worker could not run the trial: {message.get('error')}"
            self._end(trial_id, TrialState.ERRORED, error, None, finished)
            return
        self._active.discard(trial_id)
        status = message.get("status")
        if message.get("ran") is True:
            record_trial(status, message.get("phases"))
        if status is None or TrialState(str(status)).is_finished():
            finished.append(trial_id)
        # else: it was RUNNING elsewhere (another executor's); that one reports it.

    def _on_death(self, worker: WorkerProcess, finished: list[int]) -> None:
        worker.kill(grace=1.0)
        self._workers[worker.index] = None
        how = worker.how_it_ended()
        tail = worker.log_tail()
        if worker.fused and worker.trials:
            logger.warning("worker %d %s while running the fused trials %s", worker.index, how, worker.trials)
            assert worker.launch is not None  # it was sent trials
            self._requeue_alone(worker.trials, worker.launch, finished)
            self._respawn_at[worker.index] = time.monotonic()
        elif worker.trials:
            (trial_id,) = worker.trials
            logger.warning("worker %d %s while running trial %d", worker.index, how, trial_id)
            error = f"the worker process {how} while running the trial"
            details = f"last lines of the worker's log ({worker.log_path}):\n{tail}" if tail else None
            self._end(trial_id, TrialState.ERRORED, error, details, finished)
            self._respawn_at[worker.index] = time.monotonic()
        elif not worker.ready:
            logger.error("worker %d %s while starting; last lines of its log:\n%s", worker.index, how, tail)
            self._schedule_retry(worker.index)
            self._fail_queue_if_no_worker_starts(how, worker, tail, finished)
        else:
            logger.warning("worker %d %s while idle; starting another", worker.index, how)
            self._respawn_at[worker.index] = time.monotonic()

    def _requeue_alone(self, trial_ids: list[int], launch: Launch, finished: list[int]) -> None:
        """PENDING again, each as a unit of its own at the head of the queue (they waited longest)."""
        for trial_id in reversed(trial_ids):
            try:
                with session_scope(self._engine) as session:
                    requeued = requeue_trial(session, trial_id, now=_now())
            except StoreError as e:  # the job driver finds it lost and submits it again
                logger.error("trial %d: cannot requeue it: %s", trial_id, e)
                requeued = False
            if requeued:
                self._queue.appendleft([trial_id])
                self._launches[trial_id] = launch
            else:  # finished meanwhile: its own outcome counts
                self._active.discard(trial_id)
                self._stops.pop(trial_id, None)
                finished.append(trial_id)

    def _fail_queue_if_no_worker_starts(self, how: str, worker: WorkerProcess, tail: str, finished: list[int]) -> None:
        """When every worker failed to start again and again, the queue would wait forever: end it ERRORED.

        The workers are still retried (with a growing delay), so trials submitted after
        the cause is fixed (a database back up, a package installed) run.
        """
        if any(w is not None and w.ready for w in self._workers):
            return
        if min(self._start_failures) < _MAX_START_FAILURES:
            return
        error = f"no worker process can start: the last one {how} while starting (see {worker.log_path})"
        for unit in self._queue:
            for trial_id in unit:
                self._end(trial_id, TrialState.ERRORED, error, tail or None, finished)
        self._queue.clear()

    def _on_timeout(self, worker: WorkerProcess, finished: list[int]) -> None:
        trial_ids = list(worker.trials)
        if not trial_ids:
            return
        tail = worker.log_tail()
        self._retire(worker, respawn_now=False)
        error = f"exceeded the per-trial time limit of {self._time_limit:g} s"
        details = f"killed; last lines of the worker's log ({worker.log_path}):\n{tail}" if tail else "killed"
        for trial_id in trial_ids:
            self._end(trial_id, TrialState.ERRORED, error, details, finished)

    def _check(self, finished: list[int]) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            if worker is None:
                continue
            for message in worker.receive():
                self._on_message(worker, message, finished)
            if worker.gone():
                self._on_death(worker, finished)
            elif worker.deadline is not None and worker.deadline <= now:
                self._on_timeout(worker, finished)
        for index, worker in enumerate(self._workers):
            if worker is None and self._respawn_at[index] <= now:
                self._spawn(index)
        self._dispatch()

    def _next_wait(self) -> tuple[list[object], float | None]:
        waitables: list[object] = [self._wake_r]
        times: list[float] = []
        for index, worker in enumerate(self._workers):
            if worker is None:
                times.append(self._respawn_at[index])
                continue
            waitables.extend(worker.waitables())
            if worker.deadline is not None:
                times.append(worker.deadline)
            if worker.pidfd is None:
                times.append(time.monotonic() + _CHECK_INTERVAL_S)
        if not times:
            return waitables, None
        return waitables, max(0.0, min(times) - time.monotonic())

    # -- the supervisor thread ---------------------------------------------------------

    def _supervise(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                waitables, timeout = self._next_wait()
            try:
                ready = wait(waitables, timeout)  # type: ignore[arg-type]
            except (OSError, ValueError):
                ready = []  # a worker was killed by another thread meanwhile (its pipes closed): look again
            if self._wake_r in ready:
                self._drain_wake()
            finished: list[int] = []
            with self._lock:
                if self._closed:
                    return
                try:
                    self._check(finished)
                except Exception:
                    logger.exception("local executor: unexpected error in the supervisor; going on")
            self._publish(finished)

    def _wake(self) -> None:
        """Make the supervisor look again (call with the lock held: close() releases the pipe under it)."""
        if self._wake_w < 0:
            return  # closed: nobody to wake (and the number may belong to another file now)
        try:
            os.write(self._wake_w, b"\0")
        except OSError:
            pass  # full: a wake-up is pending already

    def _drain_wake(self) -> None:
        try:
            os.read(self._wake_r, 4096)  # readable: returns at once; more left over wakes us again
        except OSError:
            pass

    def _publish(self, trial_ids: Iterable[int]) -> None:
        for trial_id in trial_ids:
            self._events.publish(Event(EventKind.TRIAL_FINISHED, trial_id))

    def _release(self) -> None:
        fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            os.close(fd)
        if self._owns_engine:
            self._engine.dispose()
