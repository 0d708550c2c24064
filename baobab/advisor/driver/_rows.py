"""The job driver's calls into the store's repository, which owns every state write and lease.

The driver keeps times as epoch seconds and holds an engine; the repository takes a
session and datetimes. Each function here is one transaction of the driver's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine

from baobab.advisor._scheduling import SharedUpdate
from baobab.advisor.placement import Outlook
from baobab.model import Policy
from baobab.store import (
    JobStatus,
    Lease,
    MergeRecord,
    TrainJob,
    TrialState,
    beat_advisor,
    drop_advisor,
    end_trial,
    fail_train_job,
    fair_share,
    finish_sub_job,
    finish_train_job,
    fuse_trials,
    job_sharing,
    record_shared_merges,
    record_train_job_gpu_share,
    record_train_job_placement,
    record_train_job_profiling,
    record_train_job_window,
    request_train_job_stop,
    requeue_trial,
    retry_trial_alone,
    session_scope,
    start_train_job,
)
from baobab.store import insert_trials as insert_trial_rows

__all__ = [
    "end_job",
    "end_lost_trials",
    "record_gpu_share",
    "record_merges",
    "retry_alone",
    "NewTrial",
    "fail_job",
    "insert_units",
    "leasable",
    "record_placements",
    "record_profiling",
    "record_window",
    "release_leases",
    "renew_leases",
    "share",
    "start_job",
    "stop_job_for_time",
    "take_lease",
    "utc",
]


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _lease(driver: str, lease_s: float = 0.0) -> Lease:
    return Lease(TrainJob, driver, timedelta(seconds=lease_s))


@dataclass(frozen=True)
class NewTrial:
    """A trial row to insert (see :func:`baobab.store.insert_trials`)."""

    sub_job_id: int
    number: int
    knobs: Mapping[str, Any]
    policies: Mapping[Policy, bool]
    phase: str | None
    servable: bool
    shared_params_path: str | None
    fusion_profile: Mapping[str, Any] | None = None


def insert_units(engine: Engine, units: Sequence[Sequence[NewTrial]], now: float) -> list[tuple[list[int], int | None]]:
    """New PENDING trials, committed in one transaction before they are submitted: the units of work
    (a trial, or a fused group of them) that one scheduling pass starts.

    Returns, per unit, its trials' ids and, for more than one trial, the fused group they form (None for one).
    """
    with session_scope(engine) as session:
        ids = insert_trial_rows(session, [asdict(trial) for unit in units for trial in unit], now=utc(now))
        placed: list[tuple[list[int], int | None]] = []
        for unit in units:
            unit_ids, ids = ids[: len(unit)], ids[len(unit) :]
            placed.append((unit_ids, fuse_trials(session, unit_ids) if len(unit_ids) > 1 else None))
    return placed


class _FinishedMeanwhile(Exception):
    def __init__(self, trial_id: int) -> None:
        self.trial_id = trial_id


def end_lost_trials(engine: Engine, outcomes: Iterable[tuple[int, TrialState, str | None]], now: float) -> int | None:
    """Give lost trials their outcome: PENDING (submitted again) or a final state with ``error``.

    All or nothing: returns None when every trial was written, or the id of the first one
    that had finished meanwhile (its own state counts), and then none was."""
    stamp = utc(now)
    try:
        with session_scope(engine) as session:
            for trial_id, state, error in outcomes:
                if state is TrialState.PENDING:
                    changed = requeue_trial(session, trial_id, now=stamp)
                else:
                    changed = end_trial(session, trial_id, state, now=stamp, error=error)
                if not changed:
                    raise _FinishedMeanwhile(trial_id)  # rolls the whole batch back
    except _FinishedMeanwhile as e:
        return e.trial_id
    return None


def record_merges(engine: Engine, updates: Iterable[SharedUpdate]) -> None:
    """Record the shared weights ``updates`` wrote: whose update, onto which trial's weights."""
    with session_scope(engine) as session:
        record_shared_merges(session, (MergeRecord(u.key, u.trial_id, u.onto) for u in updates))


def start_job(engine: Engine, job_id: int, now: float) -> bool:
    """A PENDING job and its PENDING sub-jobs become RUNNING; False when the job was no longer PENDING."""
    with session_scope(engine) as session:
        return start_train_job(session, job_id, now=utc(now))


def stop_job_for_time(engine: Engine, job_id: int) -> None:
    """A job whose time budget ended becomes STOPPING (a user's stop is written by the admin API)."""
    with session_scope(engine) as session:
        request_train_job_stop(session, job_id)


def record_placements(engine: Engine, method: str, outlooks: Mapping[int, Outlook], now: float) -> None:
    """What the placement planner now tells of jobs (job id -> outlook), in one transaction: what it could not
    weigh, or each job's predicted finish and utilisation."""
    with session_scope(engine) as session:
        for job_id, outlook in outlooks.items():
            prediction = None
            if outlook.finish_in_s is not None:
                prediction = (utc(now), utc(now + outlook.finish_in_s), outlook.utilisation or 0.0)
            record_train_job_placement(session, job_id, method=method, fallback=outlook.fallback, prediction=prediction)


def record_profiling(engine: Engine, job_id: int, sub_job_id: int, decision: Mapping[str, Any]) -> None:
    """The driver's new fusion profiling decision for a sub-job (see ``SubJobState.profile_gate``)."""
    with session_scope(engine) as session:
        record_train_job_profiling(session, job_id, sub_job_id, dict(decision))


def record_window(engine: Engine, job_id: int, record: Mapping[str, Any]) -> None:
    """What deterministic mode's window cost the job so far (see ``WindowWait.record``)."""
    with session_scope(engine) as session:
        record_train_job_window(session, job_id, dict(record))


def record_gpu_share(engine: Engine, job_id: int, record: Mapping[str, Any]) -> None:
    """How many of the job's trials share each GPU, and why (see ``GpuShare.record``)."""
    with session_scope(engine) as session:
        record_train_job_gpu_share(session, job_id, dict(record))


def retry_alone(engine: Engine, trial_id: int, now: float) -> bool:
    """The ERRORED trial is PENDING again, to run alone; False when it was not ERRORED."""
    with session_scope(engine) as session:
        return retry_trial_alone(session, trial_id, now=utc(now))


def end_job(
    engine: Engine,
    job_id: int,
    sub_jobs: Iterable[tuple[int, JobStatus, str | None]],
    job: tuple[JobStatus, str | None] | None,
    now: float,
) -> None:
    """Write the end of ``sub_jobs`` (id, status, error) and, when ``job`` is given, of the job too."""
    with session_scope(engine) as session:
        for sub_id, status, error in sub_jobs:
            finish_sub_job(session, sub_id, status, error)
        if job is not None:
            finish_train_job(session, job_id, job[0], job[1], now=utc(now))


def fail_job(engine: Engine, job_id: int, message: str, now: float) -> list[int]:
    """End the job, its unfinished sub-jobs ERRORED and its unfinished trials CANCELLED, with ``message``.

    Returns the ids of the trials cancelled (for the executor to drop)."""
    with session_scope(engine) as session:
        return fail_train_job(session, job_id, message, now=utc(now))


# -- leases ------------------------------------------------------------------------------------


def leasable(driver: str, now: float) -> ColumnElement[bool]:
    """Train jobs ``driver`` may lease: held by nobody, by itself, or on a lease run out."""
    return _lease(driver).free(utc(now))


def take_lease(engine: Engine, job_id: int, driver: str, lease_s: float, now: float) -> bool:
    """Lease the job to ``driver`` for ``lease_s``; False when another driver holds it."""
    with session_scope(engine) as session:
        return _lease(driver, lease_s).take(session, job_id, utc(now))


def renew_leases(engine: Engine, job_ids: Collection[int], driver: str, lease_s: float, now: float) -> set[int]:
    """Extend ``driver``'s leases on ``job_ids``; returns those it still holds."""
    with session_scope(engine) as session:
        return _lease(driver, lease_s).renew(session, job_ids, utc(now))


def release_leases(engine: Engine, driver: str, job_ids: Collection[int] | None = None) -> None:
    """Hand back the unfinished jobs ``driver`` holds (only ``job_ids`` when given); when it hands back every
    one, it stops sharing the jobs too (a clean stop)."""
    with session_scope(engine) as session:
        if job_ids is None:
            _lease(driver).release(session, TrainJob.status.in_(JobStatus.UNFINISHED))
            drop_advisor(session, driver)
        else:
            _lease(driver).release(session, TrainJob.status.in_(JobStatus.UNFINISHED), TrainJob.id.in_(list(job_ids)))


def share(engine: Engine, driver: str, lease_s: float, now: float) -> int:
    """The most jobs ``driver`` may hold: its fair share of the unfinished jobs among the live drivers.

    It says first that ``driver`` is alive for ``lease_s`` (as long as a lease it takes), so it counts itself."""
    with session_scope(engine) as session:
        beat_advisor(session, driver, utc(now + lease_s))
        return fair_share(*job_sharing(session, utc(now)))
