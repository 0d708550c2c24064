"""The job driver: takes up train jobs, turns proposals into trials, and owns the budgets.

One thread (``JobDriver.run``) does all of it. It wakes on events (JOB_CREATED,
JOB_STOPPED, TRIAL_FINISHED), on its own timers (a job's deadline, the end of a grace
period) and on a slow rescan of the store that catches anything an event missed; it
never polls in between (it only looks at its stop flag every ``stop_check_s``).

The store is the truth and memory a cache of it. Each job the driver runs is a
:class:`~baobab.advisor._scheduling.JobState`, built once from the job's rows when the
job is taken up (or found again after a restart) and then kept in step trial by trial:
a finished trial costs one read of its row, a new trial one insert (committed before
it is submitted). So every decision is made from memory, and any restart rebuilds the
same memory from the rows:

- a trial PENDING or RUNNING in the store that the executor does not hold was lost
  (the platform stopped while it ran): it is submitted again, same row and knobs,
  unless it was already tried ``max_attempts`` times (then ERRORED);
- strategies are rebuilt from the finished trials; proposals are seeded by
  ``(sub-job seed, trial number)``, so numbers not used yet get the proposals they
  would have got;
- deadlines come from the persisted ``started_at``.

Budgets (see :class:`~baobab.advisor.Budget`): MODEL_TRIAL_COUNT trial rows per
sub-job; GPU_COUNT trials of a job at once (0: ``settings.cpu_slots``), all jobs
together within ``executor.slots``, free slots going to the job with the fewest running
trials; TIME_HOURS from the job's start: no trial starts once one would not end in time
(at the median duration of the job's finished trials), running ones are asked to stop
at the deadline and cancelled ``grace_s`` later. A user's stop does the same at once.

Several drivers may run (one per ``baobab advisor``): with ``lease_s`` set, a driver takes
up only jobs no other driver holds (``train_jobs.driver``, ``lease_expires_at``), renews
its leases every third of ``lease_s``, and drops a job whose lease another driver took
after it lapsed. A driver killed without a word loses its jobs to the others within
``lease_s``; one that stops cleanly hands them over at once.

An error while handling one job ends that job ERRORED (its ``error`` says why) and the
driver goes on; a store error instead drops the job from memory, to be taken up again
by the next rescan (after ``_STORE_RETRIES`` such errors in a row, the job ends ERRORED).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, Row, insert, or_, select, update

from baobab._settings import Settings
from baobab.advisor._base import Strategy
from baobab.advisor._budget import parse_budget
from baobab.advisor._enas import EnasStrategy
from baobab.advisor._executor import Executor
from baobab.advisor._factory import choose_strategy, make_strategy
from baobab.advisor._job_options import JobOptions, parse_job_options
from baobab.advisor._job_plan import check_job_plan
from baobab.advisor._plans import PlanStep, options_plan, servable
from baobab.advisor._scheduling import (
    ActiveTrial,
    JobState,
    StopCause,
    SubJobState,
    first_line,
    pick_next,
    record_for,
)
from baobab.advisor._stopping import Finish, Report, StoppingEvent
from baobab.advisor._trial_knobs import trial_knobs, trial_policies
from baobab.exceptions import BaobabError, StoreError, StrategyError
from baobab.model import knob_config_from_json, knobs_from_json, knobs_to_json, searchable_knobs
from baobab.store import (
    Event,
    EventChannel,
    EventKind,
    InterimMetric,
    JobStatus,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    session_scope,
)

__all__ = ["JobDriver"]

logger = logging.getLogger(__name__)

_UNFINISHED_JOB = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.STOPPING)
#: Store errors in a row on one job before it is given up as ERRORED rather than retried.
_STORE_RETRIES = 3
#: Phases that run past the time budget (see :mod:`baobab.advisor._plans`).
_FINAL_PHASES = frozenset({"final", "final_evaluate", "final_train"})
#: Events handled before the driver looks at its timers and free slots again.
_EVENT_BATCH = 256
#: Ids per ``IN (...)`` list, well below SQLite's and PostgreSQL's limits.
_CHUNK = 500

_TRIAL_COLUMNS = (
    Trial.id,
    Trial.sub_job_id,
    Trial.number,
    Trial.status,
    Trial.knobs,
    Trial.score,
    Trial.attempts,
    Trial.started_at,
    Trial.finished_at,
    Trial.error,
    Trial.phase,
    Trial.policies,
    Trial.params_path,
)


def _seconds(started: datetime | None, finished: datetime | None) -> float | None:
    if started is None or finished is None:
        return None
    return (finished - started).total_seconds()


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class JobDriver:
    """Runs every train job of the store on an executor, within the jobs' budgets.

    Args:
        engine: the metadata store.
        executor: runs trials (see :class:`~baobab.advisor.Executor`); the driver never closes it.
        events: the channel the admin API and the executor publish on.
        settings: ``cpu_slots`` is the concurrency of a GPU_COUNT=0 job.
        grace_s: how long trials asked to stop (deadline, user stop) may run before they are cancelled.
        max_errors: a sub-job whose first ``max_errors`` trials all errored starts no more.
        max_attempts: a trial lost this many times (counted by ``Trial.attempts``) is not run again.
        rescan_s: how often the store is read again in case an event was lost.
        stop_check_s: the longest the thread waits before it looks at its stop flag.
        lease_s: hold jobs by a lease of this many seconds, so that several drivers can
            share a store; None (one driver per store): no leases.
        metrics_s: how often the interim metrics of trials watched by an early-stopping rule
            are read (local workers write them to the store without an event; cluster
            workers' ``TRIAL_METRICS`` events make the driver read at once).
        name: how this driver appears in ``train_jobs.driver``; ``<host>:<pid>:<random>`` by default.
    """

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
    ) -> None:
        if lease_s is not None and lease_s <= 0:
            raise ValueError(f"JobDriver needs lease_s > 0 or None; got {lease_s=}")
        if grace_s < 0 or rescan_s <= 0 or stop_check_s <= 0 or max_errors < 1 or max_attempts < 1:
            raise ValueError(
                f"JobDriver needs grace_s >= 0, rescan_s > 0, stop_check_s > 0, max_errors >= 1 and "
                f"max_attempts >= 1; got {grace_s=}, {rescan_s=}, {stop_check_s=}, {max_errors=}, {max_attempts=}"
            )
        self.engine = engine
        self.executor = executor
        self.events = events
        self.settings = settings
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
        self._next_rescan = 0.0
        self.lease_s = lease_s
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._next_renewal = 0.0
        self.metrics_s = float(metrics_s)
        self._next_metrics = 0.0
        #: The last interim-metric row id read, per watched active trial.
        self._metric_cursor: dict[int, int] = {}
        #: Watched trials already asked to stop by their rule.
        self._stop_asked: set[int] = set()

    # -- the thread ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """The thread body: runs jobs until ``stop`` is set. Errors are logged, never raised."""
        subscription = self.events.subscribe(
            EventKind.JOB_CREATED,
            EventKind.JOB_STOPPED,
            EventKind.TRIAL_FINISHED,
            EventKind.TRIAL_METRICS,
            EventKind.TRIAL_STOP_REQUESTED,
        )
        self._next_rescan = 0.0  # subscribed first, then the store is read: nothing falls in between
        try:
            while not stop.is_set():
                self.step()
                event = subscription.get(timeout=self.wait_s())
                handled = 0
                while event is not None:
                    self._safely(self.handle, event)
                    handled += 1
                    if handled >= _EVENT_BATCH or stop.is_set():
                        break
                    event = subscription.get(timeout=0)
        finally:
            subscription.close()
            self._safely(self.release_leases)

    def step(self, now: float | None = None) -> None:
        """Fire what is due (rescan, deadlines, grace ends) and fill free slots."""
        self._safely(self.tick, now)
        self._safely(self.schedule)

    def wait_s(self, now: float | None = None) -> float:
        """Seconds until the next timer (at most ``stop_check_s``)."""
        now = time.time() if now is None else now
        due = min(self._next_rescan, now + self.stop_check_s)
        if self.lease_s is not None and self._jobs:
            due = min(due, self._next_renewal)
        if self._metric_cursor:
            due = min(due, self._next_metrics)
        for job in self._jobs.values():
            timer = job.next_timer()
            if timer is not None and timer < due:
                due = timer
        return max(0.0, due - now)

    @property
    def jobs(self) -> dict[int, JobState]:
        """The jobs the driver runs now, by id (a view for tests and status pages; do not change it)."""
        return self._jobs

    def _safely(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            logger.exception("job driver: %s failed; going on", getattr(fn, "__name__", fn))

    # -- events and timers ---------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """React to one event (the store is read for what it names)."""
        if event.kind is EventKind.TRIAL_FINISHED:
            self._on_trial_finished(event.id)
        elif event.kind is EventKind.TRIAL_STOP_REQUESTED:
            if event.id in self._owners:  # a user stopped this one trial: it ends early, its score counts
                self._tell(self.executor.request_stop, event.id, "stopped by a user")
        elif event.kind is EventKind.TRIAL_METRICS:
            if event.id in self._metric_cursor:
                self.read_metrics()
        elif event.kind is EventKind.JOB_CREATED:
            if event.id not in self._jobs:
                self.adopt([event.id])
        elif event.kind is EventKind.JOB_STOPPED:
            job = self._jobs.get(event.id)
            if job is None:
                self.adopt([event.id])
            elif job.stop_cause is None:
                with self._guard(job):
                    with session_scope(self.engine) as session:
                        status = session.scalar(select(TrainJob.status).where(TrainJob.id == job.id))
                    if status is JobStatus.STOPPING:
                        self._begin_stop(job, StopCause.USER, time.time())
                    elif status is None or status.is_finished():
                        self._forget(job)

    def tick(self, now: float | None = None) -> None:
        """Rescan the store when due; stop jobs whose deadline came; cancel what outlived a grace period."""
        now = time.time() if now is None else now
        if self.lease_s is not None and now >= self._next_renewal:
            self._next_renewal = now + self.lease_s / 3
            self._safely(self.renew_leases, now)
        if now >= self._next_rescan:
            self._next_rescan = now + self.rescan_s
            self._safely(self.rescan)
        if self._metric_cursor and now >= self._next_metrics:
            self._safely(self.read_metrics)
        for job in list(self._jobs.values()):
            if job.stop_cause is None and job.deadline is not None and now >= job.deadline:
                with self._guard(job):
                    self._begin_stop(job, StopCause.TIME, now)
            elif (
                job.stop_cause is not None and not job.cancelled and job.grace_end is not None and now >= job.grace_end
            ):
                with self._guard(job):
                    self._cancel_rest(job, now)

    # -- scheduling ----------------------------------------------------------------------------

    def schedule(self) -> int:
        """Give free slots to the jobs that want them, one new trial per slot; returns how many started."""
        if not self._jobs:
            return 0
        ahead = getattr(self.executor, "queue_ahead", 0)
        free = self.executor.slots * (1 + ahead) - len(self._owners)
        started = 0
        now = time.time()
        while free > 0:
            picked = pick_next(self._jobs.values(), now, ahead=ahead)
            if picked is None:
                break
            job, sub = picked
            ok = False
            with self._guard(job):
                ok = self._start_trial(job, sub, now)
            if ok:
                free -= 1
                started += 1
        return started

    def _strategy(self, sub: SubJobState) -> Strategy | None:
        """The sub-job's strategy, built on first use from the records of its finished trials."""
        if sub.strategy is not None:
            return sub.strategy
        assert sub.knob_config is not None  # a sub-job without one has a failure and wants no trials
        name = sub.strategy_name
        try:
            if name == "auto":
                name = choose_strategy(sub.knob_config)
            strategy = make_strategy(name, sub.knob_config, seed=sub.seed)
            for record in sorted(sub.history, key=lambda r: r.trial_id):
                strategy.observe(record)
        except Exception as e:
            sub.failure = f"strategy {name!r}: {type(e).__name__}: {e}"
            return None
        sub.strategy = strategy
        sub.history = []
        return strategy

    def _start_trial(self, job: JobState, sub: SubJobState, now: float) -> bool:
        """Propose, insert (committed), submit. False when the sub-job's strategy failed instead."""
        step = sub.next_step(job, now)
        if not isinstance(step, PlanStep):
            return False
        strategy = self._strategy(sub)
        number = sub.next_number
        if strategy is not None:
            try:
                pending = [t.proposal for t in sub.active.values()]
                if step.proposal is not None:
                    proposal = step.proposal
                elif step.phase is not None and isinstance(strategy, EnasStrategy):
                    proposal = strategy.propose_for(step.phase, number, pending)
                else:
                    proposal = strategy.propose(number, pending)
                assert sub.knob_config is not None
                policies = trial_policies(sub.knob_config, step.policies)
                stored = _json_knobs(trial_knobs(sub.knob_config, proposal, policies))
            except Exception as e:
                sub.failure = f"strategy {strategy.name!r} failed to propose trial {number}: {type(e).__name__}: {e}"
                strategy = None
        if strategy is None:
            logger.warning("job %s, sub-job %s: %s", job.id, sub.id, sub.failure)
            self._check_end(job, now)
            return False
        sharing = bool(policies.get("SHARE_PARAMS"))
        with session_scope(self.engine) as session:
            trial_id = session.execute(
                insert(Trial)
                .values(
                    sub_job_id=sub.id,
                    number=number,
                    knobs=stored,
                    policies=policies,
                    phase=step.phase,
                    servable=servable(policies),
                    shared_params_path=sub.shared_params() if sharing else None,
                    status=TrialState.PENDING,
                    submitted_at=_utc(now),
                )
                .returning(Trial.id)
            ).scalar_one()
        trial = ActiveTrial(
            trial_id,
            number,
            {k: v for k, v in stored.items() if k in sub.searchable},
            phase=step.phase,
            final=step.final,
            shares=sharing and step.phase in self._share_phases(sub),
        )
        sub.add_started(trial)
        self._watch(sub, trial)
        sub.next_number = number + 1
        sub.trials += 1
        sub.active[trial_id] = trial
        self._owners[trial_id] = (job, sub)
        self.executor.submit(trial_id)
        return True

    # -- finished trials -----------------------------------------------------------------------

    def _on_trial_finished(self, trial_id: int) -> None:
        owner = self._owners.get(trial_id)
        if owner is None:
            return  # not ours, or already seen (a rescan found it first)
        job, _ = owner
        with self._guard(job):
            rows = self._trial_rows([trial_id])
            if not rows:
                self._finish_trial(trial_id, TrialState.CANCELLED, None, None, "the trial row was deleted", time.time())
            elif rows[0].status.is_finished():
                self._apply_row(rows[0], time.time())

    def _apply_row(self, row: Row[Any], now: float) -> None:
        duration = _seconds(row.started_at, row.finished_at)
        self._finish_trial(row.id, row.status, row.score, duration, row.error, now, row.params_path)

    def _finish_trial(
        self,
        trial_id: int,
        state: TrialState,
        score: float | None,
        duration: float | None,
        error: str | None,
        now: float,
        params: str | None = None,
    ) -> None:
        """Account for a trial that reached a final state: counts, durations, the strategy, the stopping rule,
        endings."""
        owner = self._owners.pop(trial_id, None)
        if owner is None:
            return
        job, sub = owner
        self._suspects.discard(trial_id)
        trial = sub.active.pop(trial_id)
        sub.count(state, error)
        if duration is not None and state is not TrialState.CANCELLED:
            job.add_duration(duration)
        sub.add_finished(trial, state, score, duration, params)
        self._stop_asked.discard(trial_id)
        if self._metric_cursor.pop(trial_id, None) is not None and sub.rule is not None:
            good = state.is_scored()
            sub.rule.finished(trial.number, score if good else None)
        record = record_for(trial, state, score)
        if not sub.observes(trial):
            pass  # a final retraining: the search it ends is over
        elif sub.strategy is None:
            sub.history.append(record)
        else:
            try:
                sub.strategy.observe(record)
            except Exception as e:
                if sub.failure is None:
                    sub.failure = f"strategy {sub.strategy.name!r} failed to observe trial {trial.number}: {e}"
        if sub.failure is None and not sub.ended and sub.broken():
            sub.failure = sub.broken_message()
            logger.warning("job %s, sub-job %s: %s", job.id, sub.id, sub.failure)
            reason = f"sub-job {sub.id} stopped: its first {sub.errored} trials all errored"
            for other in list(sub.active):
                self._tell(self.executor.cancel, other, reason)
        self._check_end(job, now)

    # -- stopping ------------------------------------------------------------------------------

    def _begin_stop(self, job: JobState, cause: StopCause, now: float) -> None:
        """No new trials; trials that run are asked to stop, pending ones are cancelled; grace starts."""
        job.stop(cause, now + self.grace_s)
        if cause is StopCause.TIME:
            with session_scope(self.engine) as session:
                session.execute(
                    update(TrainJob)
                    .where(TrainJob.id == job.id, TrainJob.status == JobStatus.RUNNING)
                    .values(status=JobStatus.STOPPING)
                )
        logger.info("job %s: %s; %d trials running", job.id, job.stop_reason, job.running)
        ids = [
            trial_id
            for sub in job.sub_jobs.values()
            for trial_id, trial in sub.active.items()
            if not (trial.final and cause is StopCause.TIME)  # a final phase runs past the time budget
        ]
        for row in self._trial_rows(ids):
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

    def _tell(self, method: Callable[[int, str], None], trial_id: int, reason: str) -> None:
        # A failed stop or cancel costs that trial its grace, not the job; the executor reports the outcome.
        try:
            method(trial_id, reason)
        except Exception:
            logger.exception("job driver: %s(%s) failed", getattr(method, "__name__", method), trial_id)

    # -- endings -------------------------------------------------------------------------------

    def _check_end(self, job: JobState, now: float) -> None:
        """Write the end of every sub-job that ended, and of the job when all have."""
        if self._jobs.get(job.id) is not job:
            return  # already ended (or dropped) while this call's caller was at work
        ending, done = job.ending(now)
        if not ending and not done:
            return
        outcomes = {sub.id: sub.outcome(job.stop_cause) for sub in ending}
        for sub in ending:
            sub.status, sub.error = outcomes[sub.id]
        status, error = job.outcome() if done else (None, None)
        try:
            with session_scope(self.engine) as session:
                for sub in ending:
                    session.execute(
                        update(SubJob)
                        .where(SubJob.id == sub.id, SubJob.status.in_(_UNFINISHED_JOB))
                        .values(status=sub.status, error=sub.error)
                    )
                if done:
                    session.execute(
                        update(TrainJob)
                        .where(TrainJob.id == job.id, TrainJob.status.in_(_UNFINISHED_JOB))
                        .values(status=status, error=error, finished_at=_utc(now))
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
        for sub in job.sub_jobs.values():
            for trial_id in sub.active:
                self._owners.pop(trial_id, None)
                self._suspects.discard(trial_id)
                self._metric_cursor.pop(trial_id, None)
                self._stop_asked.discard(trial_id)

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
        now = _utc(time.time())
        try:
            with session_scope(self.engine) as session:
                trial_ids = list(
                    session.scalars(
                        select(Trial.id)
                        .join(Trial.sub_job)
                        .where(SubJob.train_job_id == job_id, Trial.status.in_(TrialState.UNFINISHED))
                    )
                )
                for chunk in _chunks(trial_ids):
                    session.execute(
                        update(Trial)
                        .where(Trial.id.in_(chunk), Trial.status.in_(TrialState.UNFINISHED))
                        .values(status=TrialState.CANCELLED, error=message, finished_at=now)
                    )
                session.execute(
                    update(SubJob)
                    .where(SubJob.train_job_id == job_id, SubJob.status.in_(_UNFINISHED_JOB))
                    .values(status=JobStatus.ERRORED, error=message)
                )
                session.execute(
                    update(TrainJob)
                    .where(TrainJob.id == job_id, TrainJob.status.in_(_UNFINISHED_JOB))
                    .values(status=JobStatus.ERRORED, error=message, finished_at=now)
                )
        except Exception:
            logger.exception("job %s: could not be marked ERRORED; the next rescan looks again", job_id)
            return
        self._store_failures.pop(job_id, None)
        for trial_id in trial_ids:
            self._tell(self.executor.cancel, trial_id, message)

    # -- the store: rescans, taking up jobs, lost trials ---------------------------------------

    def _trial_rows(self, ids: Sequence[int]) -> list[Row[Any]]:
        if not ids:
            return []
        rows: list[Row[Any]] = []
        with session_scope(self.engine) as session:
            for chunk in _chunks(list(ids)):
                rows.extend(session.execute(select(*_TRIAL_COLUMNS).where(Trial.id.in_(chunk))).all())
        return rows

    def rescan(self) -> None:
        """Read the store again: jobs to take up or stop, trials whose event was lost, trials lost outright."""
        now = time.time()
        known = list(self._jobs)
        with session_scope(self.engine) as session:
            query = select(TrainJob.id, TrainJob.status).where(
                or_(TrainJob.status.in_(_UNFINISHED_JOB), TrainJob.id.in_(known[:_CHUNK]))
            )
            rows = session.execute(query).all()
        statuses = {row.id: row.status for row in rows}
        to_adopt = []
        for job_id, status in statuses.items():
            job = self._jobs.get(job_id)
            if job is None:
                if status in _UNFINISHED_JOB:
                    to_adopt.append(job_id)
            elif status.is_finished():
                self._forget(job)  # someone else ended it
            elif status is JobStatus.STOPPING and job.stop_cause is None:
                with self._guard(job):
                    self._begin_stop(job, StopCause.USER, now)
        if self._owners:
            self._check_held(now)
        if to_adopt:
            self.adopt(to_adopt)

    def _check_held(self, now: float) -> None:
        held = self.executor.active()
        missing = [trial_id for trial_id in self._owners if trial_id not in held]
        suspects = set()
        for row in self._trial_rows(missing):
            owner = self._owners.get(row.id)
            if owner is None:
                continue
            job, sub = owner
            with self._guard(job):
                if row.status.is_finished():
                    self._apply_row(row, now)  # its event was lost
                elif row.id in self._suspects:
                    self._recover_lost(job, sub, row, now)
                else:
                    suspects.add(row.id)
        self._suspects = suspects

    def _recover_lost(self, job: JobState, sub: SubJobState, row: Row[Any], now: float) -> None:
        """A trial the executor no longer holds while the store says it runs: run it again, or end it."""
        state, error = self._lost_outcome(job, row)
        with session_scope(self.engine) as session:
            changed = session.execute(
                update(Trial)
                .where(Trial.id == row.id, Trial.status.in_(TrialState.UNFINISHED))
                .values(
                    status=state,
                    error=error,
                    finished_at=None if state is TrialState.PENDING else _utc(now),
                    submitted_at=_utc(now),
                )
            ).rowcount
        if not changed:
            return  # it finished meanwhile; its event follows
        if state is TrialState.PENDING:
            logger.warning("trial %s was lost; submitting it again", row.id)
            self.executor.submit(row.id)
        else:
            self._finish_trial(row.id, state, None, None, error, now)

    def _lost_outcome(self, job: JobState, row: Row[Any]) -> tuple[TrialState, str | None]:
        if job.stop_cause is not None:
            return TrialState.CANCELLED, f"lost (its worker or the platform stopped) after {job.stop_reason}"
        if row.attempts >= self.max_attempts:
            return TrialState.ERRORED, (
                f"lost {row.attempts} times (its worker or the platform stopped while it ran); not run again"
            )
        return TrialState.PENDING, None

    def adopt(self, job_ids: Iterable[int] | None = None) -> None:
        """Take up the unfinished jobs of the store (only ``job_ids`` when given) that the driver does not run."""
        query = select(TrainJob).where(TrainJob.status.in_(_UNFINISHED_JOB)).order_by(TrainJob.created_at, TrainJob.id)
        if self.lease_s is not None:
            query = query.where(self._leasable(_utc(time.time())))
        if job_ids is not None:
            ids = [i for i in job_ids if i not in self._jobs]
            if not ids:
                return
            query = query.where(TrainJob.id.in_(ids))
        with session_scope(self.engine) as session:
            rows = [row for row in session.scalars(query) if row.id not in self._jobs]
        if not rows:
            return
        held = self.executor.active()  # failing here defers every job to the next rescan, and ends none
        for row in rows:
            try:
                self._adopt_job(row, held, time.time())
            except Exception as e:
                self._fail_job(row.id, e, self._jobs.get(row.id))

    def _adopt_job(self, row: TrainJob, held: set[int], now: float) -> None:
        if self.lease_s is not None and not self._take_lease(row.id, now):
            return  # another driver took it meanwhile
        status, started_at = row.status, row.started_at
        if status is JobStatus.PENDING:
            started_at = _utc(now)
            with session_scope(self.engine) as session:
                taken = session.execute(
                    update(TrainJob)
                    .where(TrainJob.id == row.id, TrainJob.status == JobStatus.PENDING)
                    .values(status=JobStatus.RUNNING, started_at=started_at)
                ).rowcount
                if taken:
                    session.execute(
                        update(SubJob)
                        .where(SubJob.train_job_id == row.id, SubJob.status == JobStatus.PENDING)
                        .values(status=JobStatus.RUNNING)
                    )
            if not taken:
                return  # it changed meanwhile (stopped?): the event that says so, or the next rescan, takes it
            status = JobStatus.RUNNING
            logger.info("job %s (%s v%s): taken up", row.id, row.app, row.app_version)
        budget = parse_budget(row.budget)
        deadline = None
        if budget.time_hours is not None and started_at is not None:
            deadline = started_at.timestamp() + budget.time_hours * 3600
        options = parse_job_options(row.train_args, trial_count=budget.model_trial_count)
        job = JobState(
            id=row.id,
            created_at=row.created_at.timestamp(),
            started_at=started_at.timestamp() if started_at is not None else now,
            cap=budget.workers(self.settings.cpu_slots),
            deadline=deadline,
            time_hours=budget.time_hours,
        )
        # Decided before the trials are read: a stopping job's lost trials are cancelled, not run again.
        if deadline is not None and now >= deadline:
            job.stop(StopCause.TIME, now + self.grace_s)
        elif status is JobStatus.STOPPING:
            job.stop(StopCause.USER, now + self.grace_s)

        with session_scope(self.engine) as session:
            subs = session.execute(
                select(SubJob, ModelTemplate.name, ModelTemplate.knob_config)
                .join(ModelTemplate, SubJob.model_template_id == ModelTemplate.id)
                .where(SubJob.train_job_id == row.id)
                .order_by(SubJob.id)
            ).all()
            trials = session.execute(
                select(*_TRIAL_COLUMNS).join(Trial.sub_job).where(SubJob.train_job_id == row.id).order_by(Trial.id)
            ).all()
        for sub_row, model_name, knob_config_text in subs:
            job.sub_jobs[sub_row.id] = self._sub_job_state(
                sub_row, model_name, knob_config_text, job, options, budget.model_trial_count
            )

        lost: list[tuple[Row[Any], TrialState, str | None]] = []
        for trial in trials:
            sub = job.sub_jobs[trial.sub_job_id]
            sub.trials += 1
            sub.next_number = max(sub.next_number, trial.number + 1)
            knobs = trial.knobs if isinstance(trial.knobs, Mapping) else knobs_from_json(trial.knobs)
            active = ActiveTrial(
                trial.id,
                trial.number,
                {k: v for k, v in knobs.items() if k in sub.searchable},
                phase=trial.phase,
                final=trial.phase in _FINAL_PHASES,
                shares=bool((trial.policies or {}).get("SHARE_PARAMS")) and trial.phase in self._share_phases(sub),
            )
            sub.add_started(active)
            if trial.status.is_finished():
                sub.count(trial.status, trial.error)
                duration = _seconds(trial.started_at, trial.finished_at)
                if duration is not None and trial.status is not TrialState.CANCELLED:
                    job.add_duration(duration)
                sub.add_finished(active, trial.status, trial.score, duration, trial.params_path)
                if sub.observes(active):
                    sub.history.append(record_for(active, trial.status, trial.score))
            elif trial.id in held:
                sub.active[trial.id] = active
            else:
                state, error = self._lost_outcome(job, trial)
                lost.append((trial, state, error))
                if state is TrialState.PENDING:
                    sub.active[trial.id] = active
                else:
                    sub.count(state, error)
                    sub.add_finished(active, state, None, None, None)
                    if sub.observes(active):
                        sub.history.append(record_for(active, state, None))

        if lost:
            stamp = _utc(now)
            with session_scope(self.engine) as session:
                for trial, state, error in lost:
                    changed = session.execute(
                        update(Trial)
                        .where(Trial.id == trial.id, Trial.status.in_(TrialState.UNFINISHED))
                        .values(
                            status=state,
                            error=error,
                            finished_at=None if state is TrialState.PENDING else stamp,
                            submitted_at=stamp,
                        )
                    ).rowcount
                    if not changed:  # it finished meanwhile: its own state counts, not ours
                        raise StoreError(f"trial {trial.id} changed while job {row.id} was taken up; trying again")
        for sub in job.sub_jobs.values():
            if sub.failure is None and not sub.ended and sub.broken():
                sub.failure = sub.broken_message()
        self._rebuild_rules(job, trials)
        self._jobs[job.id] = job
        for sub in job.sub_jobs.values():
            for trial_id in sub.active:
                self._owners[trial_id] = (job, sub)
        for trial, state, _ in lost:
            if state is TrialState.PENDING:
                logger.warning("job %s: trial %s was lost; submitting it again", job.id, trial.id)
                self.executor.submit(trial.id)
        if job.stop_cause is not None:
            self._begin_stop(job, job.stop_cause, now)
        else:
            self._check_end(job, now)

    # -- leases --------------------------------------------------------------------------------

    def _leasable(self, now: datetime) -> ColumnElement[bool]:
        return or_(TrainJob.driver.is_(None), TrainJob.driver == self.name, TrainJob.lease_expires_at < now)

    def _take_lease(self, job_id: int, now: float) -> bool:
        assert self.lease_s is not None
        stamp = _utc(now)
        with session_scope(self.engine) as session:
            taken = session.execute(
                update(TrainJob)
                .where(TrainJob.id == job_id, self._leasable(stamp))
                .values(driver=self.name, lease_expires_at=stamp + timedelta(seconds=self.lease_s))
            ).rowcount
        if taken:
            logger.info("job %s: leased by %s", job_id, self.name)
        return bool(taken)

    def renew_leases(self, now: float | None = None) -> None:
        """Extend the leases of the jobs this driver runs; forget those another driver took."""
        if self.lease_s is None or not self._jobs:
            return
        now = time.time() if now is None else now
        ids = list(self._jobs)
        until = _utc(now) + timedelta(seconds=self.lease_s)
        with session_scope(self.engine) as session:
            for chunk in _chunks(ids):
                session.execute(
                    update(TrainJob)
                    .where(TrainJob.id.in_(chunk), TrainJob.driver == self.name)
                    .values(lease_expires_at=until)
                )
            mine = set()
            for chunk in _chunks(ids):
                mine.update(
                    session.scalars(select(TrainJob.id).where(TrainJob.id.in_(chunk), TrainJob.driver == self.name))
                )
        for job_id in ids:
            job = self._jobs.get(job_id)
            if job is not None and job_id not in mine:
                logger.warning("job %s: another advisor holds it now; letting it go", job_id)
                self._forget(job)

    def release_leases(self) -> None:
        """Hand this driver's jobs back at once (a clean stop), so another driver takes them up."""
        if self.lease_s is None:
            return
        with session_scope(self.engine) as session:
            session.execute(
                update(TrainJob)
                .where(TrainJob.driver == self.name, TrainJob.status.in_(_UNFINISHED_JOB))
                .values(driver=None, lease_expires_at=None)
            )

    def _sub_job_state(
        self,
        row: SubJob,
        model_name: str,
        knob_config_text: str,
        job: JobState,
        options: JobOptions,
        trial_count: int | None,
    ) -> SubJobState:
        sub = SubJobState(
            id=row.id,
            job_id=row.train_job_id,
            model_name=model_name,
            strategy_name=row.strategy,
            seed=row.seed,
            knob_config=None,
            trial_count=trial_count,
            max_errors=self.max_errors,
            status=row.status if row.status.is_finished() else JobStatus.RUNNING,
            error=row.error,
            options=options,
        )
        try:
            sub.knob_config = knob_config_from_json(knob_config_text)
        except Exception as e:
            sub.failure = f"the template's knob config cannot be read: {type(e).__name__}: {e}"
            return sub
        sub.policies = trial_policies(sub.knob_config)
        sub.searchable = frozenset(searchable_knobs(sub.knob_config))
        try:
            sub.plan = check_job_plan(
                row.strategy,
                sub.knob_config,
                options,
                trial_count=trial_count,
                time_hours=job.time_hours,
                workers=job.cap,
            )
        except StrategyError as e:
            sub.failure = str(e)
            sub.plan = options_plan(options)
        return sub

    # -- early stopping --------------------------------------------------------------------------

    @staticmethod
    def _share_phases(sub: SubJobState) -> frozenset[str | None]:
        return frozenset({None}) if sub.plan is None else sub.plan.share_phases

    @staticmethod
    def _ruled(sub: SubJobState, phase: str | None) -> bool:
        return sub.options.stopping_rule != "none" and sub.plan is not None and phase in sub.plan.ruled_phases

    def _watch(self, sub: SubJobState, trial: ActiveTrial, cursor: int = 0) -> None:
        """Read the interim metrics of ``trial`` from now on, when its sub-job's stopping rule watches it."""
        if self._ruled(sub, trial.phase):
            if sub.rule is None:
                sub.rule = sub.options.stopping_rule_for()
            self._metric_cursor[trial.id] = cursor

    def _rebuild_rules(self, job: JobState, trials: Sequence[Row[Any]]) -> None:
        """Each sub-job's stopping rule, replayed from its trials' stored metrics and ends, in time order."""
        ruled = {t.id: t for t in trials if self._ruled(job.sub_jobs[t.sub_job_id], t.phase)}
        if not ruled:
            return
        rows: list[Row[Any]] = []
        with session_scope(self.engine) as session:
            for chunk in _chunks(list(ruled)):
                query = select(InterimMetric.id, InterimMetric.trial_id, InterimMetric.step, InterimMetric.metrics)
                rows.extend(
                    session.execute(
                        query.add_columns(InterimMetric.time).where(InterimMetric.trial_id.in_(chunk))
                    ).all()
                )
        events: dict[int, list[tuple[datetime, int, StoppingEvent]]] = {}
        last: dict[int, int] = {}
        probe = {sub_id: sub.options.stopping_rule_for() for sub_id, sub in job.sub_jobs.items()}
        for metric in rows:
            trial = ruled[metric.trial_id]
            value = probe[trial.sub_job_id].value_of(metric.metrics or {})
            events.setdefault(trial.sub_job_id, []).append(
                (metric.time, metric.id, Report(trial.number, metric.step, value))
            )
            last[metric.trial_id] = max(last.get(metric.trial_id, 0), metric.id)
        for trial in ruled.values():
            if trial.status.is_finished() and trial.finished_at is not None:
                good = trial.status.is_scored()
                finish = Finish(trial.number, trial.score if good else None)
                events.setdefault(trial.sub_job_id, []).append((trial.finished_at, 1 << 62, finish))
        for sub_id, sub in job.sub_jobs.items():
            ordered = sorted(events.get(sub_id, []), key=lambda item: (item[0], item[1]))
            sub.rule = sub.options.stopping_rule_for(event for _, _, event in ordered)
            for trial_id, trial in sub.active.items():
                if trial_id in ruled:
                    self._watch(sub, trial, last.get(trial_id, 0))

    def read_metrics(self) -> None:
        """Feed the new interim metrics of watched trials to their stopping rules; stop those a rule says to."""
        self._next_metrics = time.time() + self.metrics_s
        if not self._metric_cursor:
            return
        lowest = min(self._metric_cursor.values())
        rows: list[Row[Any]] = []
        with session_scope(self.engine) as session:
            for chunk in _chunks(list(self._metric_cursor)):
                rows.extend(
                    session.execute(
                        select(InterimMetric.id, InterimMetric.trial_id, InterimMetric.step, InterimMetric.metrics)
                        .where(InterimMetric.trial_id.in_(chunk), InterimMetric.id > lowest)
                        .order_by(InterimMetric.id)
                    ).all()
                )
        for metric in rows:
            cursor = self._metric_cursor.get(metric.trial_id)
            owner = self._owners.get(metric.trial_id)
            if cursor is None or metric.id <= cursor or owner is None:
                continue
            self._metric_cursor[metric.trial_id] = metric.id
            job, sub = owner
            trial = sub.active.get(metric.trial_id)
            if sub.rule is None or trial is None:
                continue
            decision = sub.rule.report(trial.number, metric.step, sub.rule.value_of(metric.metrics or {}))
            if decision.stop and trial.id not in self._stop_asked:
                logger.info("job %s: trial %s stopped early: %s", job.id, trial.id, decision.reason)
                self._tell(self.executor.request_stop, trial.id, f"early stopping: {decision.reason}")
                self._stop_asked.add(trial.id)


def _json_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Knob values as JSON keeps them (tuples become lists; NaN and infinity are refused)."""
    return json.loads(knobs_to_json(knobs))
