"""Every write of the job driver to the store: trials, sub-jobs, train jobs and leases.

Plain functions, one per state change the driver makes, so that the store's repository
can take them over in one place. Each runs in its own transaction. Times are epoch
seconds, as the driver keeps them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, insert, or_, select, update

from baobab.store import JobStatus, SubJob, TrainJob, Trial, TrialState, session_scope

__all__ = [
    "CHUNK",
    "UNFINISHED_JOB",
    "chunks",
    "end_job",
    "end_lost_trials",
    "fail_job",
    "insert_trial",
    "leasable",
    "release_leases",
    "renew_leases",
    "start_job",
    "stop_job_for_time",
    "take_lease",
    "utc",
]

UNFINISHED_JOB = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.STOPPING)
#: Ids per ``IN (...)`` list, well below SQLite's and PostgreSQL's limits.
CHUNK = 500


def chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    """``ids`` in slices short enough for one ``IN (...)`` list."""
    for i in range(0, len(ids), CHUNK):
        yield ids[i : i + CHUNK]


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def insert_trial(
    engine: Engine,
    *,
    sub_job_id: int,
    number: int,
    knobs: Mapping[str, Any],
    policies: Mapping[str, bool],
    phase: str | None,
    servable: bool,
    shared_params_path: str | None,
    now: float,
) -> int:
    """A new PENDING trial, committed before it is submitted; returns its id."""
    with session_scope(engine) as session:
        trial_id: int = session.execute(
            insert(Trial)
            .values(
                sub_job_id=sub_job_id,
                number=number,
                knobs=dict(knobs),
                policies=dict(policies),
                phase=phase,
                servable=servable,
                shared_params_path=shared_params_path,
                status=TrialState.PENDING,
                submitted_at=utc(now),
            )
            .returning(Trial.id)
        ).scalar_one()
    return trial_id


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
                changed = session.execute(
                    update(Trial)
                    .where(Trial.id == trial_id, Trial.status.in_(TrialState.UNFINISHED))
                    .values(
                        status=state,
                        error=error,
                        finished_at=None if state is TrialState.PENDING else stamp,
                        submitted_at=stamp,
                    )
                ).rowcount
                if not changed:
                    raise _FinishedMeanwhile(trial_id)
    except _FinishedMeanwhile as e:
        return e.trial_id
    return None


def start_job(engine: Engine, job_id: int, now: float) -> bool:
    """A PENDING job and its PENDING sub-jobs become RUNNING; False when the job was no longer PENDING."""
    with session_scope(engine) as session:
        taken = session.execute(
            update(TrainJob)
            .where(TrainJob.id == job_id, TrainJob.status == JobStatus.PENDING)
            .values(status=JobStatus.RUNNING, started_at=utc(now))
        ).rowcount
        if taken:
            session.execute(
                update(SubJob)
                .where(SubJob.train_job_id == job_id, SubJob.status == JobStatus.PENDING)
                .values(status=JobStatus.RUNNING)
            )
    return bool(taken)


def stop_job_for_time(engine: Engine, job_id: int) -> None:
    """A RUNNING job whose time budget ended becomes STOPPING (a user's stop is written by the admin API)."""
    with session_scope(engine) as session:
        session.execute(
            update(TrainJob)
            .where(TrainJob.id == job_id, TrainJob.status == JobStatus.RUNNING)
            .values(status=JobStatus.STOPPING)
        )


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
            session.execute(
                update(SubJob)
                .where(SubJob.id == sub_id, SubJob.status.in_(UNFINISHED_JOB))
                .values(status=status, error=error)
            )
        if job is not None:
            session.execute(
                update(TrainJob)
                .where(TrainJob.id == job_id, TrainJob.status.in_(UNFINISHED_JOB))
                .values(status=job[0], error=job[1], finished_at=utc(now))
            )


def fail_job(engine: Engine, job_id: int, message: str, now: float) -> list[int]:
    """End the job, its unfinished sub-jobs ERRORED and its unfinished trials CANCELLED, with ``message``.

    Returns the ids of the trials cancelled (for the executor to drop)."""
    stamp = utc(now)
    with session_scope(engine) as session:
        trial_ids = list(
            session.scalars(
                select(Trial.id)
                .join(Trial.sub_job)
                .where(SubJob.train_job_id == job_id, Trial.status.in_(TrialState.UNFINISHED))
            )
        )
        for chunk in chunks(trial_ids):
            session.execute(
                update(Trial)
                .where(Trial.id.in_(chunk), Trial.status.in_(TrialState.UNFINISHED))
                .values(status=TrialState.CANCELLED, error=message, finished_at=stamp)
            )
        session.execute(
            update(SubJob)
            .where(SubJob.train_job_id == job_id, SubJob.status.in_(UNFINISHED_JOB))
            .values(status=JobStatus.ERRORED, error=message)
        )
        session.execute(
            update(TrainJob)
            .where(TrainJob.id == job_id, TrainJob.status.in_(UNFINISHED_JOB))
            .values(status=JobStatus.ERRORED, error=message, finished_at=stamp)
        )
    return trial_ids


# -- leases ------------------------------------------------------------------------------------


def leasable(driver: str, now: float) -> ColumnElement[bool]:
    """Train jobs ``driver`` may lease: held by nobody, by itself, or on a lease run out."""
    return or_(TrainJob.driver.is_(None), TrainJob.driver == driver, TrainJob.lease_expires_at < utc(now))


def take_lease(engine: Engine, job_id: int, driver: str, lease_s: float, now: float) -> bool:
    """Lease the job to ``driver`` for ``lease_s``; False when another driver holds it."""
    with session_scope(engine) as session:
        taken = session.execute(
            update(TrainJob)
            .where(TrainJob.id == job_id, leasable(driver, now))
            .values(driver=driver, lease_expires_at=utc(now) + timedelta(seconds=lease_s))
        ).rowcount
    return bool(taken)


def renew_leases(engine: Engine, job_ids: Collection[int], driver: str, lease_s: float, now: float) -> set[int]:
    """Extend ``driver``'s leases on ``job_ids``; returns those it still holds."""
    ids = list(job_ids)
    until = utc(now) + timedelta(seconds=lease_s)
    mine: set[int] = set()
    with session_scope(engine) as session:
        for chunk in chunks(ids):
            session.execute(
                update(TrainJob).where(TrainJob.id.in_(chunk), TrainJob.driver == driver).values(lease_expires_at=until)
            )
        for chunk in chunks(ids):
            mine.update(session.scalars(select(TrainJob.id).where(TrainJob.id.in_(chunk), TrainJob.driver == driver)))
    return mine


def release_leases(engine: Engine, driver: str) -> None:
    """Hand back every unfinished job ``driver`` holds."""
    with session_scope(engine) as session:
        session.execute(
            update(TrainJob)
            .where(TrainJob.driver == driver, TrainJob.status.in_(UNFINISHED_JOB))
            .values(driver=None, lease_expires_at=None)
        )
