"""The job driver's memory and what it does to a job it runs: finish trials, stop, end, fail.

:class:`DriverCore` holds the jobs the driver runs (each a
:class:`~baobab.advisor._scheduling.JobState`, kept in step with the store trial by
trial) and the operations every path shares, whether an event, a timer or a rescan
brought the news. :mod:`._sync` adds the store's side (rescans, taking up jobs, leases)
and :mod:`._driver` the thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sqlalchemy import Engine, Row

from baobab._settings import Placement, Settings
from baobab.advisor._executor import Executor
from baobab.advisor._gpu_share import is_gpu_out_of_memory
from baobab.advisor._scheduling import ActiveTrial, JobState, StopCause, SubJobState, first_line, record_finished
from baobab.advisor.driver import _rows, _telemetry
from baobab.advisor.driver._metrics import MetricFeed
from baobab.advisor.driver._reads import run_seconds, trial_rows
from baobab.advisor.driver._shared_weights import write_updates
from baobab.advisor.placement import Planner
from baobab.exceptions import BaobabError, StoreError
from baobab.store import ArtifactStore, EventChannel, JobStatus, TrialState

__all__ = ["DriverCore"]

logger = logging.getLogger(__name__)

#: Store errors in a row on one job before it is given up as ERRORED rather than retried.
_STORE_RETRIES = 3


class DriverCore:
    """The driver's state and shared operations (see :class:`~baobab.advisor.JobDriver` for the arguments)."""

    def __init__(
        self,
        engine: Engine,
        executor: Executor,
        events: EventChannel,
        settings: Settings,
        *,
        grace_s: float = 30.0,
        max_errors: int = 5,
        max_attempts: int = 3,
        rescan_s: float = 30.0,
        stop_check_s: float = 0.5,
        lease_s: float | None = None,
        name: str | None = None,
        metrics_s: float = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if lease_s is not None and lease_s <= 0:
            raise ValueError(f"JobDriver needs lease_s > 0 or None; got {lease_s=}")
        if grace_s < 0 or rescan_s <= 0 or stop_check_s <= 0 or max_errors < 1 or max_attempts < 1:
            raise ValueError(
                f"JobDriver needs grace_s >= 0, rescan_s > 0, stop_check_s > 0, max_errors >= 1 and "
                f"max_attempts >= 1; got {grace_s=}, {rescan_s=}, {stop_check_s=}, {max_errors=}, {max_attempts=}"
            )
        self.engine = engine
        #: Epoch seconds now: every timer, deadline and timestamp the driver writes reads it.
        self.clock = clock
        self.executor = executor
        self.events = events
        self.settings = settings
        #: The placement planner, unless the fixed rules place trials (``settings.placement``).
        self.planner = None if settings.placement is Placement.RULES else Planner(settings.placement.value)
        #: Per job, when the planner's outlook was last stored, and its fallback then.
        self._outlooks: dict[int, tuple[float, str | None]] = {}
        self.grace_s = float(grace_s)
        self.max_errors = int(max_errors)
        self.max_attempts = int(max_attempts)
        self.rescan_s = float(rescan_s)
        self.stop_check_s = float(stop_check_s)
        self._jobs: dict[int, JobState] = {}
        #: Every active trial id -> its job and sub-job.
        self._owners: dict[int, tuple[JobState, SubJobState]] = {}
        #: Active trials the executor did not hold at the last rescan (lost if still so at the next).
        self._suspects: set[int] = set()
        self._store_failures: dict[int, int] = {}
        #: The last id given to a trial proposed in a scheduling pass and not stored yet (they count down from -1).
        self._unstored = 0
        self._next_rescan = 0.0
        self.lease_s = lease_s
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._next_renewal = 0.0
        self.metrics_s = float(metrics_s)
        self._next_metrics = 0.0
        self._metrics = MetricFeed()
        self._artifacts: ArtifactStore | None = None

    @property
    def jobs(self) -> dict[int, JobState]:
        """The jobs the driver runs now, by id (a view for tests and status pages; do not change it)."""
        return self._jobs

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store, opened on first use: only shared weights that add up need it."""
        if self._artifacts is None:
            self._artifacts = ArtifactStore(self.settings.artifacts_url)
        return self._artifacts

    def _write_updates(self, sub: SubJobState) -> None:
        """Write the shared weights the sub-job's finished trials added up to, before a trial is handed them, and
        record what each holds (a failed record costs the lineage that link, not the job)."""
        if sub.updates:
            written = write_updates(self.artifacts, sub)
            if written:
                self._safely(_rows.record_merges, self.engine, written)

    def _safely(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            logger.exception("job driver: %s failed; going on", getattr(fn, "__name__", fn))

    def _tell(self, method: Callable[[int, str], None], trial_id: int, reason: str) -> None:
        # A failed stop or cancel costs that trial its grace, not the job; the executor reports the outcome.
        try:
            method(trial_id, reason)
        except Exception:
            logger.exception("job driver: %s(%s) failed", getattr(method, "__name__", method), trial_id)

    # -- finished trials -----------------------------------------------------------------------

    def _apply_row(self, row: Row[Any], now: float) -> None:
        duration = run_seconds(row)
        self._finish_trial(
            row.id, row.status, row.score, duration, row.error, now, row.params_path, row.fusion_profile, row.gpu_memory
        )

    def _finish_trial(
        self,
        trial_id: int,
        state: TrialState,
        score: float | None,
        duration: float | None,
        error: str | None,
        now: float,
        params: str | None = None,
        profile: Mapping[str, Any] | None = None,
        gpu_memory: Mapping[str, Any] | None = None,
    ) -> None:
        """A trial the driver runs reached a final state: account for it, feed its rule, end what ended."""
        owner = self._owners.get(trial_id)
        if owner is None:
            return
        job, sub = owner
        if job.share is not None and self._retried_alone(job, sub.active[trial_id], state, error, now):
            return
        del self._owners[trial_id]
        _telemetry.TRIALS_FINISHED.labels(state.value).inc()
        self._suspects.discard(trial_id)
        trial = sub.active.pop(trial_id)
        watched = self._metrics.finished(trial_id)
        record_finished(
            job, sub, trial, state, score=score, duration=duration, error=error, params=params, profile=profile
        )
        self._write_updates(sub)
        if job.share is not None:
            self._measure_share(job, trial, state, None if duration is None else (now - duration, now), gpu_memory)
        if watched and sub.rule is not None:
            sub.rule.finished(trial.number, score if state.is_scored() else None)
        if sub.failure is None and not sub.ended and sub.broken():
            sub.failure = sub.broken_message()
            logger.warning("job %s, sub-job %s: %s", job.id, sub.id, sub.failure)
            reason = f"sub-job {sub.id} stopped: its first {sub.errored} trials all errored"
            for other in list(sub.active):
                self._tell(self.executor.cancel, other, reason)
        self._check_end(job, now)

    # -- GPU sharing ---------------------------------------------------------------------------

    def _retried_alone(
        self, job: JobState, trial: ActiveTrial, state: TrialState, error: str | None, now: float
    ) -> bool:
        """A trial that ran out of GPU memory beside others of its job runs again alone, not counted as an error:
        True when it was set PENDING for that (it waits until the job's other trials end; see :meth:`schedule`)."""
        share = job.share
        assert share is not None
        if (
            state is not TrialState.ERRORED
            or trial.share_level < 2
            or trial.id in share.retried
            or job.stop_cause is not None
            or not is_gpu_out_of_memory(error)
            or not _rows.retry_alone(self.engine, trial.id, now)
        ):
            return False
        logger.warning("job %s: trial %s ran out of GPU memory beside others; it runs again alone", job.id, trial.id)
        share.out_of_memory(trial.id, trial.share_epoch)
        trial.run_alone()
        trial.share_epoch, trial.share_level = None, 1
        self._safely(_rows.record_gpu_share, self.engine, job.id, share.record)
        return True

    def _measure_share(
        self,
        job: JobState,
        trial: ActiveTrial,
        state: TrialState,
        ran: tuple[float, float] | None,
        memory: Mapping[str, Any] | None,
    ) -> None:
        """Feed the job's GPU share a finished trial; ``ran`` is when it ran, ending when the driver heard of it."""
        share = job.share
        assert share is not None
        share.ended(trial.id)
        epoch = -1 if trial.share_epoch is None else trial.share_epoch
        if share.finished(epoch, ran, memory, completed=state is TrialState.COMPLETED):
            logger.info("job %s: %d trial(s) per GPU (%s)", job.id, share.level, share.changes[-1]["reason"])
            self._safely(_rows.record_gpu_share, self.engine, job.id, share.record)

    def _send_alone(self) -> None:
        """Submit the next trial waiting to run alone of each job that runs nothing else now."""
        for job in self._jobs.values():
            if job.share is not None and job.stop_cause is None:
                trial_id = job.share.next_alone(job.running)
                if trial_id is not None:
                    self._safely(self.executor.submit, trial_id)

    # -- stopping ------------------------------------------------------------------------------

    def _begin_stop(self, job: JobState, cause: StopCause, now: float) -> None:
        """No new trials; trials that run are asked to stop, pending ones are cancelled; grace starts."""
        job.stop(cause, now + self.grace_s)
        if cause is StopCause.TIME:
            _rows.stop_job_for_time(self.engine, job.id)
        logger.info("job %s: %s; %d trials running", job.id, job.stop_reason, job.running)
        ids = [
            trial_id
            for sub in job.sub_jobs.values()
            for trial_id, trial in sub.active.items()
            if not (trial.final and cause is StopCause.TIME)  # a final phase runs past the time budget
        ]
        for row in trial_rows(self.engine, ids):
            if row.status is TrialState.RUNNING:
                self._tell(self.executor.request_stop, row.id, job.stop_reason)
            elif row.status is TrialState.PENDING:
                self._tell(self.executor.cancel, row.id, job.stop_reason)
            else:
                self._apply_row(row, now)  # its TRIAL_FINISHED is on its way; no need to wait
        self._check_end(job, now)

    def _cancel_rest(self, job: JobState, now: float) -> None:
        job.cancelled = True
        reason = f"{job.stop_reason}, and the trial still ran {self.grace_s:g} s later"
        for sub in job.sub_jobs.values():
            for trial_id, trial in list(sub.active.items()):
                if not (trial.final and job.stop_cause is StopCause.TIME):
                    self._tell(self.executor.cancel, trial_id, reason)
        self._check_end(job, now)

    # -- endings -------------------------------------------------------------------------------

    def _check_end(self, job: JobState, now: float) -> None:
        """Write the end of every sub-job that ended, and of the job when all have."""
        if self._jobs.get(job.id) is not job:
            return  # already ended (or dropped) while this call's caller was at work
        ending, done = job.ending(now)
        if not ending and not done:
            return
        if done and job.window_wait is not None and job.window_wait.note(0, now):
            _rows.record_window(self.engine, job.id, job.window_wait.record())  # a wait the job's end ended
        outcomes = {sub.id: sub.outcome(job.stop_cause) for sub in ending}
        for sub in ending:
            sub.status, sub.error = outcomes[sub.id]
        status, error = job.outcome() if done else (None, None)
        try:
            _rows.end_job(
                self.engine,
                job.id,
                [(sub.id, sub.status, sub.error) for sub in ending],
                (status, error) if status is not None else None,
                now,
            )
        except BaseException:
            for sub in ending:
                sub.status, sub.error = JobStatus.RUNNING, None
            raise
        for sub in ending:
            logger.info("job %s, sub-job %s: %s%s", job.id, sub.id, sub.status, f" ({sub.error})" if sub.error else "")
        if done:
            logger.info("job %s: %s%s", job.id, status, f" ({error})" if error else "")
            self._forget(job)

    def _forget(self, job: JobState) -> None:
        self._jobs.pop(job.id, None)
        self._outlooks.pop(job.id, None)
        for sub in job.sub_jobs.values():
            for trial_id in sub.active:
                self._owners.pop(trial_id, None)
                self._suspects.discard(trial_id)
                self._metrics.forget(trial_id)

    @contextlib.contextmanager
    def _guard(self, job: JobState) -> Iterator[None]:
        """Errors while handling ``job`` end that job (or, for a store error, defer it to the next rescan)."""
        try:
            yield
            self._store_failures.pop(job.id, None)
        except Exception as e:
            self._fail_job(job.id, e, job)

    def _fail_job(self, job_id: int, error: Exception, job: JobState | None = None) -> None:
        if job is not None:
            self._forget(job)
        if isinstance(error, StoreError):
            failures = self._store_failures.get(job_id, 0) + 1
            self._store_failures[job_id] = failures
            if failures < _STORE_RETRIES:
                logger.warning("job %s: %s; the next rescan takes it up again", job_id, error)
                return
        # A BaobabError says what is wrong with the job's data; anything else is a bug worth its traceback.
        logger.error(
            "job %s: ending it ERRORED: %s", job_id, error, exc_info=None if isinstance(error, BaobabError) else error
        )
        message = f"the job driver could not run this job: {type(error).__name__}: {first_line(str(error))}"
        try:
            trial_ids = _rows.fail_job(self.engine, job_id, message, self.clock())
        except Exception:
            logger.exception("job %s: could not be marked ERRORED; the next rescan looks again", job_id)
            return
        self._store_failures.pop(job_id, None)
        for trial_id in trial_ids:
            self._tell(self.executor.cancel, trial_id, message)
