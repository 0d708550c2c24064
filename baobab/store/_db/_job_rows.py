"""Train jobs and their sub-jobs: every change of state, as the admin API and the job driver make them.

- **add**: a PENDING job with a PENDING sub-job per template (the admin API);
- **start**: PENDING → RUNNING with ``started_at``, its PENDING sub-jobs with it, when a
  job driver takes the job up;
- **stop**: PENDING or RUNNING → STOPPING, when a user stops it or its time runs out
  (the driver then lets the running trials end);
- **finish**: a sub-job's or the job's final state, when the driver sees it ended;
- **fail**: the job ERRORED, its unfinished sub-jobs ERRORED and its unfinished trials
  CANCELLED, all with one message, when the driver cannot run it;
- **placement**: what the placement planner predicted for an unfinished job (the driver,
  under ``BAOBAB_PLACEMENT`` other than ``rules``).

Every write is conditional on the state it leaves, so a late writer (a user's stop
while the driver ends the job) never overwrites an end another stored first: each
operation says whether it changed the row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import update
from sqlalchemy.orm import Session

from baobab.enums import JobStatus, Task, TrialState
from baobab.store._db._engine import changed_rows
from baobab.store._db._tables import SubJob, TrainJob
from baobab.store._db._trial_control import end_unfinished_trials

__all__ = [
    "add_train_job",
    "fail_train_job",
    "finish_sub_job",
    "finish_train_job",
    "record_train_job_placement",
    "record_train_job_profiling",
    "record_train_job_gpu_share",
    "record_train_job_window",
    "request_train_job_stop",
    "start_train_job",
    "sub_job_seed",
]


def sub_job_seed(job_seed: int, index: int) -> int:
    """The seed of a job's ``index``-th sub-job: every proposal and trial seed of the sub-job comes from it.

    Derived, not drawn, so that a job created again with the same seed and templates
    searches the same way.
    """
    return int(np.random.SeedSequence([job_seed, index]).generate_state(1, np.uint64)[0] >> 1)


def add_train_job(
    session: Session,
    *,
    owner_id: int,
    app: str,
    app_version: int,
    task: Task,
    train_dataset_id: int,
    val_dataset_id: int,
    budget: Mapping[str, Any],
    train_args: Mapping[str, Any],
    seed: int,
    sub_jobs: Iterable[tuple[int, str]],
    options: Mapping[str, Any] | None = None,
    target: str | None = None,
) -> TrainJob:
    """Add a PENDING train job seeded with ``seed``, with a PENDING sub-job per ``(template id, strategy)``.

    Flushed (its id is set); each sub-job's seed is :func:`sub_job_seed` of its place.

    Raises:
        sqlalchemy.exc.IntegrityError: the app version was taken meanwhile (or a dataset
            or template deleted); the caller rolls back and looks again.
    """
    job = TrainJob(
        owner_id=owner_id,
        app=app,
        app_version=app_version,
        task=task,
        train_dataset_id=train_dataset_id,
        val_dataset_id=val_dataset_id,
        budget=dict(budget),
        train_args=dict(train_args),
        options=dict(options or {}),
        target=target,
        seed=seed,
        status=JobStatus.PENDING,
    )
    job.sub_jobs = [
        SubJob(
            model_template_id=template_id,
            strategy=strategy,
            seed=sub_job_seed(seed, index),
            status=JobStatus.PENDING,
        )
        for index, (template_id, strategy) in enumerate(sub_jobs)
    ]
    session.add(job)
    session.flush()
    return job


def start_train_job(session: Session, job_id: int, *, now: datetime) -> bool:
    """PENDING → RUNNING, started at ``now``, with its PENDING sub-jobs; False when it was no longer PENDING."""
    started = changed_rows(
        session,
        update(TrainJob)
        .where(TrainJob.id == job_id, TrainJob.status == JobStatus.PENDING)
        .values(status=JobStatus.RUNNING, started_at=now),
    )
    if started:
        session.execute(
            update(SubJob)
            .where(SubJob.train_job_id == job_id, SubJob.status == JobStatus.PENDING)
            .values(status=JobStatus.RUNNING)
        )
    return bool(started)


def request_train_job_stop(session: Session, job_id: int) -> bool:
    """PENDING or RUNNING → STOPPING; False when it was stopping or finished already."""
    statement = (
        update(TrainJob)
        .where(TrainJob.id == job_id, TrainJob.status.in_((JobStatus.PENDING, JobStatus.RUNNING)))
        .values(status=JobStatus.STOPPING)
    )
    return bool(changed_rows(session, statement))


def finish_sub_job(session: Session, sub_job_id: int, status: JobStatus, error: str | None) -> bool:
    """Store a sub-job's final ``status`` while it is unfinished; True if it changed."""
    _check_final(status)
    statement = (
        update(SubJob)
        .where(SubJob.id == sub_job_id, SubJob.status.in_(JobStatus.UNFINISHED))
        .values(status=status, error=error)
    )
    return bool(changed_rows(session, statement))


def finish_train_job(session: Session, job_id: int, status: JobStatus, error: str | None, *, now: datetime) -> bool:
    """Store a job's final ``status``, finished at ``now``, while it is unfinished; True if it changed."""
    _check_final(status)
    statement = (
        update(TrainJob)
        .where(TrainJob.id == job_id, TrainJob.status.in_(JobStatus.UNFINISHED))
        .values(status=status, error=error, finished_at=now)
    )
    return bool(changed_rows(session, statement))


def fail_train_job(session: Session, job_id: int, error: str, *, now: datetime) -> list[int]:
    """End an unfinished job ERRORED with ``error``: its sub-jobs too, and its unfinished trials CANCELLED.

    Returns the ids of those trials, for the executor to drop.
    """
    trial_ids = end_unfinished_trials(session, job_id, TrialState.CANCELLED, error=error, now=now)
    session.execute(
        update(SubJob)
        .where(SubJob.train_job_id == job_id, SubJob.status.in_(JobStatus.UNFINISHED))
        .values(status=JobStatus.ERRORED, error=error)
    )
    finish_train_job(session, job_id, JobStatus.ERRORED, error, now=now)
    return trial_ids


#: Predictions a job keeps (the latest): enough to draw them against what happened.
PLACEMENT_PREDICTIONS = 100


def record_train_job_placement(
    session: Session,
    job_id: int,
    *,
    method: str,
    fallback: str | None,
    prediction: tuple[datetime, datetime, float] | None,
) -> bool:
    """Store the planner's ``method`` and ``fallback`` (why the rules placed its trials, or None) on an
    unfinished job, and add ``prediction`` (when, the job's predicted finish, the predicted
    utilisation of the slots) to its latest ones; True if the job was unfinished."""
    job = _unfinished(session, job_id)
    if job is None:
        return False
    predictions = list((job.placement or {}).get("predictions", []))
    if prediction is not None:
        at, finish, utilisation = prediction
        predictions.append([at.isoformat(), finish.isoformat(), round(utilisation, 4)])
    job.placement = {
        **(job.placement or {}),  # keeps the driver's fusion profiling decisions (record_train_job_profiling)
        "method": method,
        "fallback": fallback,
        "predictions": predictions[-PLACEMENT_PREDICTIONS:],
    }
    return True


def record_train_job_profiling(session: Session, job_id: int, sub_job_id: int, decision: dict[str, Any]) -> bool:
    """Store the driver's latest fusion profiling decision for one sub-job of an unfinished job (fusion
    "auto": whether its trials measure fusion profiles, and why) under ``placement["profiling"]``, by
    sub-job id; True if the job was unfinished. The placement column holds how the driver places the
    job's trials, the planner's outlook and this alike (no column of its own)."""
    job = _unfinished(session, job_id)
    if job is None:
        return False
    placement = dict(job.placement or {})
    placement["profiling"] = {**placement.get("profiling", {}), str(sub_job_id): dict(decision)}
    job.placement = placement
    return True


def record_train_job_window(session: Session, job_id: int, record: dict[str, Any]) -> bool:
    """Store what deterministic mode's window cost an unfinished job (the window, the seconds it waited)
    under ``placement["deterministic"]``; True if the job was unfinished."""
    job = _unfinished(session, job_id)
    if job is None:
        return False
    job.placement = {**(job.placement or {}), "deterministic": dict(record)}
    return True


def record_train_job_gpu_share(session: Session, job_id: int, record: dict[str, Any]) -> bool:
    """Store how many of an unfinished job's trials share each GPU and why (``placement["gpu_share"]``, see
    ``baobab.advisor._gpu_share``); True if the job was unfinished."""
    job = _unfinished(session, job_id)
    if job is None:
        return False
    job.placement = {**(job.placement or {}), "gpu_share": dict(record)}
    return True


def _unfinished(session: Session, job_id: int) -> TrainJob | None:
    """The job's row, locked for the caller's update of what the driver records on it, if it is unfinished."""
    job = session.get(TrainJob, job_id, with_for_update=True)
    return job if job is not None and job.status in JobStatus.UNFINISHED else None


def _check_final(status: JobStatus) -> None:
    if not status.is_finished():
        raise ValueError(f"{status} is not a final state")
