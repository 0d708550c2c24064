"""The inference supervisor: one predictor process per running inference job.

A thread of ``baobab up``, or ``baobab predictor`` on any machine of a cluster. It
follows the store, not only the events: when it starts, and every ``reconcile_s``
seconds, it starts a predictor for each STARTING job that has none (so a lost
INFERENCE_CREATED only delays it) and stops the predictors of jobs that are finished
(so does a lost INFERENCE_STOPPED).

Several supervisors (predictor hosts) share the jobs by leases in ``inference_jobs``
(``driver``, ``lease_expires_at``, ``BAOBAB_LEASE_S``), as advisors share train jobs: a
supervisor starts a predictor only for a job whose lease it took, renews its leases at
each reconcile, and stops a predictor whose lease another took. It also takes over
RUNNING jobs whose lease is free (released by a supervisor that stopped cleanly, or run
out because its host died): their predictors are gone, so they are set back to
STARTING (no URL) and started again.

A job's life, as stored:

- STARTING → RUNNING (with ``predictor_url``) when the predictor prints its URL line;
- STARTING → ERRORED (``error``: its last output) when it exits first, or does not
  serve within ``start_timeout_s`` (then it is killed);
- RUNNING → ERRORED when the predictor dies while serving. It is not restarted: a
  predictor only runs Baobab's own code (the templates run in its workers, which it
  restarts itself), so its death is a fault to look at, not to hide;
- STOPPED is the admin API's to set; the supervisor then kills the process group.

A finished job may be deleted (the admin API), and its request logs with it. A
predictor writes its last part as it stops, which may come after the API deleted the
logs: so when a predictor has exited and its job is gone, the supervisor deletes them
again.

Every write is conditional on the state it leaves (``WHERE status IN (...)``), so a
late writer never overwrites a STOPPED job.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from baobab import Settings
from baobab._contained import ProcessGroup, how_it_ended, with_package_path
from baobab._prometheus import MULTIPROC_DIR_ENV
from baobab._settings import ENV_PREFIX
from baobab.exceptions import BaobabError, StoreError
from baobab.predictor._main import PredictorOptions
from baobab.store import (
    ArtifactStore,
    EventChannel,
    EventKind,
    InferenceJob,
    InferenceJobStatus,
    Lease,
    delete_request_logs,
    fail_inference_job,
    serve_inference_job,
    session_scope,
    take_over_inference_jobs,
)

__all__ = ["InferenceSupervisor"]

logger = logging.getLogger("baobab.predictor")

_LIVE = (InferenceJobStatus.STARTING, InferenceJobStatus.RUNNING)
#: How long a predictor has to exit on SIGTERM before its group is killed.
_TERM_GRACE_S = 3.0
#: How much of a predictor's last output goes into a job's error.
_TAIL_LINES = 12
_TAIL_CHARS = 4000


class _Predictor:
    """One predictor process and what the supervisor knows of it."""

    def __init__(self, job_id: int, process: ProcessGroup, log_path: Path, log_offset: int) -> None:
        self.job_id = job_id
        self.process = process
        self.log_path = log_path
        self.log_offset = log_offset  # where this run's output starts in the (appended) log
        self.started = time.monotonic()
        self.url: str | None = None
        self.stopping = False  # killed on purpose: its exit is not an error
        self.timed_out: float | None = None  # killed for not serving within this many seconds


class InferenceSupervisor:
    """Starts, watches and stops the predictor processes of inference jobs.

    Call :meth:`run` in a thread of its own; it returns when ``stop`` is set (and then
    kills every predictor). :meth:`close` does the killing from any thread.

    Args:
        engine: the metadata store.
        events: the channel the admin API publishes INFERENCE_CREATED and INFERENCE_STOPPED on.
        settings: handed to each predictor through its environment; logs go to
            ``settings.home/"logs"/"predictor-<id>.log"``.
        host: the interface predictors listen on.
        job_ids: serve only these inference jobs (a container per job); ``None``: all.
        port: the port predictors listen on; 0 lets each pick a free one (the only
            choice when several jobs are served here).
        advertise: the host name their URLs give the API; by default ``host``, or the
            machine's name when ``host`` is every interface.
        options: batching and timeouts of the predictors.
        start_timeout_s: how long a predictor has to load its members and serve.
        reconcile_s: how often the store is compared with the running predictors (and
            leases renewed: at least three times a ``settings.lease_s``).
    """

    def __init__(
        self,
        engine: Engine,
        events: EventChannel,
        settings: Settings,
        *,
        host: str = "127.0.0.1",
        job_ids: Collection[int] | None = None,
        port: int = 0,
        advertise: str | None = None,
        options: PredictorOptions | None = None,
        start_timeout_s: float = 300.0,
        reconcile_s: float = 5.0,
    ) -> None:
        self._engine = engine
        self._events = events
        self._settings = settings
        if port and (job_ids is None or len(job_ids) != 1):
            raise ValueError("a fixed predictor port serves one inference job: give exactly one job id")
        self._host = host
        self._job_ids = frozenset(job_ids) if job_ids is not None else None
        self._port = port
        self._advertise = advertise
        self._options = options if options is not None else PredictorOptions()
        self._start_timeout_s = start_timeout_s
        # leases are renewed at each reconcile: often enough that none runs out between two
        self._reconcile_s = min(reconcile_s, settings.lease_s / 3)
        self._predictors: dict[int, _Predictor] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: how this supervisor signs its leases
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._lease = Lease(InferenceJob, self.name, timedelta(seconds=settings.lease_s))

    def predictor_pid(self, job_id: int) -> int | None:
        """The process id of job ``job_id``'s predictor, if one runs (also its process group)."""
        with self._lock:
            predictor = self._predictors.get(job_id)
        return predictor.process.pid if predictor is not None else None

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then kill every predictor."""
        subscription = self._events.subscribe(EventKind.INFERENCE_CREATED, EventKind.INFERENCE_STOPPED)
        try:
            next_reconcile = time.monotonic()  # at once: what the store holds comes before any event
            while not stop.is_set() and not self._closed:
                try:
                    if time.monotonic() >= next_reconcile:
                        self._reconcile()
                        next_reconcile = time.monotonic() + self._reconcile_s
                    event = subscription.get(timeout=0.2)
                    if event is not None and event.kind is EventKind.INFERENCE_CREATED:
                        self._start_if_wanted(event.id)
                    elif event is not None and event.kind is EventKind.INFERENCE_STOPPED:
                        self._stop_if_finished(event.id)
                    self._check_start_timeouts()
                except StoreError:  # the database is away for a moment: try again shortly
                    logger.exception("inference supervisor: the metadata store failed")
                    stop.wait(1.0)
        finally:
            subscription.close()
            self.close()

    def close(self) -> None:
        """Kill every predictor and release the leases: their jobs stay RUNNING, for the next supervisor to take."""
        with self._lock:
            self._closed = True
            predictors = list(self._predictors.values())
        for predictor in predictors:  # all at once, then the grace period for all
            self._mark_stopping(predictor)
            predictor.process.signal_group(signal.SIGTERM)
        for predictor in predictors:
            self._kill(predictor)
        try:
            with session_scope(self._engine) as session:
                self._lease.release(session)
        except StoreError:  # the leases run out instead
            logger.warning("inference supervisor %s: could not release its leases", self.name)

    # -- following the store --------------------------------------------------------------

    def _mine(self, query: Any) -> Any:
        """``query`` narrowed to the jobs this supervisor serves."""
        return query if self._job_ids is None else query.where(InferenceJob.id.in_(self._job_ids))

    def _take_over(self) -> None:
        """RUNNING jobs with a free lease lost their predictor: lease them and serve them again."""
        now = datetime.now(UTC)
        with session_scope(self._engine) as session:
            taken = take_over_inference_jobs(session, self._lease, now=now, job_ids=self._job_ids)
        if taken:
            logger.info("inference supervisor %s: took over %d running inference jobs", self.name, taken)

    def _lease_job(self, job_id: int) -> bool:
        """Take (or keep) the lease of a STARTING job; False if another supervisor holds it."""
        now = datetime.now(UTC)
        with session_scope(self._engine) as session:
            return self._lease.take(session, job_id, now, InferenceJob.status == InferenceJobStatus.STARTING)

    def _reconcile(self) -> None:
        now = datetime.now(UTC)
        with self._lock:
            running = set(self._predictors)
        with session_scope(self._engine) as session:
            # a lease another took (this host was frozen past it) is lost
            kept = self._lease.renew(session, running, now, InferenceJob.status.in_(_LIVE))
        self._take_over()
        with session_scope(self._engine) as session:
            starting = set(
                session.scalars(
                    self._mine(select(InferenceJob.id)).where(
                        InferenceJob.status == InferenceJobStatus.STARTING, self._lease.free(now)
                    )
                )
            )
        for job_id in sorted(starting - running):
            if self._lease_job(job_id):
                self._start(job_id)
        for job_id in sorted(running - kept):
            self._stop(job_id)

    def _start_if_wanted(self, job_id: int) -> None:
        if self._job_ids is not None and job_id not in self._job_ids:
            return
        with self._lock:
            known = job_id in self._predictors
        if not known and self._lease_job(job_id):
            self._start(job_id)

    def _stop_if_finished(self, job_id: int) -> None:
        with session_scope(self._engine) as session:
            status = session.scalar(select(InferenceJob.status).where(InferenceJob.id == job_id))
        if status is None or status.is_finished():
            self._stop(job_id)

    def _check_start_timeouts(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [
                p
                for p in self._predictors.values()
                if p.url is None and not p.stopping and p.timed_out is None and now - p.started > self._start_timeout_s
            ]
            for predictor in late:
                predictor.timed_out = self._start_timeout_s
        for predictor in late:
            logger.warning("predictor of inference job %d did not serve in time; killing it", predictor.job_id)
            self._kill(predictor)

    # -- processes ------------------------------------------------------------------------

    def _start(self, job_id: int) -> None:
        log_dir = self._settings.home / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"predictor-{job_id}.log"
        command = [
            sys.executable,
            "-m",
            "baobab.predictor",
            str(job_id),
            f"--host={self._host}",
            f"--port={self._port}",
            *([f"--advertise={self._advertise}"] if self._advertise else []),
            "--exit-with-parent",
            *self._options.to_args(),
        ]
        with self._lock:
            if self._closed or job_id in self._predictors:
                return
            with log_path.open("ab") as log:
                log_offset = log.tell()
                process = ProcessGroup(
                    command,
                    stdin=subprocess.PIPE,  # kept open: its end tells the predictor we are gone
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=_predictor_env(self._settings),
                )
            predictor = _Predictor(job_id, process, log_path, log_offset)
            self._predictors[job_id] = predictor
        logger.info("started the predictor of inference job %d (pid %d)", job_id, process.pid)
        threading.Thread(target=self._follow, args=(predictor,), name=f"predictor-{job_id}", daemon=True).start()

    def _stop(self, job_id: int) -> None:
        with self._lock:
            predictor = self._predictors.get(job_id)
        if predictor is not None:
            logger.info("stopping the predictor of inference job %d", job_id)
            self._kill(predictor)

    def _mark_stopping(self, predictor: _Predictor) -> None:
        """Its exit is on purpose, no error (unless it is killed for not serving in time)."""
        with self._lock:
            if predictor.timed_out is None:
                predictor.stopping = True

    def _kill(self, predictor: _Predictor) -> None:
        """Stop a predictor's process group: SIGTERM, then SIGKILL after a grace period; reap it."""
        self._mark_stopping(predictor)
        predictor.process.stop(_TERM_GRACE_S)

    def _follow(self, predictor: _Predictor) -> None:
        """Read the predictor's stdout (the URL line), then record how it ended."""
        process = predictor.process
        assert process.stdout is not None and process.stdin is not None
        try:
            for line in process.stdout:
                url = _url_of(line)
                if url is not None and predictor.url is None:
                    predictor.url = url
                    try:
                        self._record_running(predictor)
                    except StoreError:
                        logger.exception("inference job %d: storing its URL failed", predictor.job_id)
        finally:
            process.stdout.close()
            returncode = process.wait()
            try:
                process.stdin.close()
            except OSError:
                pass
            try:
                self._record_exit(predictor, returncode)
            except StoreError:  # a STARTING job is started again by the next reconcile
                logger.exception("inference job %d: storing how its predictor ended failed", predictor.job_id)
            finally:
                with self._lock:
                    if self._predictors.get(predictor.job_id) is predictor:
                        del self._predictors[predictor.job_id]
            self._delete_logs_if_deleted(predictor.job_id)

    def _record_running(self, predictor: _Predictor) -> None:
        assert predictor.url is not None
        with session_scope(self._engine) as session:
            changed = serve_inference_job(session, predictor.job_id, self._lease, predictor.url)
        if changed:
            logger.info("inference job %d is served at %s", predictor.job_id, predictor.url)
        else:  # stopped while it started: nobody wants it
            logger.info("inference job %d is no longer starting; stopping its predictor", predictor.job_id)
            threading.Thread(target=self._kill, args=(predictor,), daemon=True).start()

    def _record_exit(self, predictor: _Predictor, returncode: int) -> None:
        if predictor.stopping:
            return
        if predictor.timed_out is not None:
            reason = f"the predictor did not serve within {predictor.timed_out:g} s and was killed"
        else:
            how = how_it_ended(returncode)
            reason = f"the predictor {how} {'while serving' if predictor.url else 'before serving'}"
        tail = _tail(predictor.log_path, predictor.log_offset)
        error = f"{reason}; its last output ({predictor.log_path}):\n{tail}" if tail else reason
        logger.warning("inference job %d: %s", predictor.job_id, error)
        with session_scope(self._engine) as session:
            fail_inference_job(session, predictor.job_id, self._lease, error, now=datetime.now(UTC))

    def _delete_logs_if_deleted(self, job_id: int) -> None:
        """Delete the request logs of a deleted job: its predictor, now gone, may have written after the API did."""
        try:
            with session_scope(self._engine) as session:
                gone = session.scalar(select(InferenceJob.id).where(InferenceJob.id == job_id)) is None
            if gone:
                delete_request_logs(ArtifactStore(self._settings.artifacts_url), job_id)
        except (OSError, BaobabError):  # StoreError among them
            logger.exception("inference job %d: deleting the request logs of the deleted job failed", job_id)


def _url_of(line: bytes) -> str | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    url = message.get("url") if isinstance(message, dict) else None
    return url if isinstance(url, str) else None


def _predictor_env(settings: Settings) -> dict[str, str]:
    """This process's environment, with ``settings`` as the only ``BAOBAB_*`` variables.

    Without ``PROMETHEUS_MULTIPROC_DIR``: a predictor is one process, and its ``/metrics``
    (open to anyone who may call it) must count its own job alone, not add up the files of
    other processes that share the folder.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(ENV_PREFIX) and name != MULTIPROC_DIR_ENV
    }
    env.update(settings.to_env())
    return with_package_path(env)


def _tail(path: Path, offset: int) -> str:
    """The last lines of ``path`` from byte ``offset`` on."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    tail = "\n".join(text.rstrip().splitlines()[-_TAIL_LINES:])
    return tail[-_TAIL_CHARS:]
