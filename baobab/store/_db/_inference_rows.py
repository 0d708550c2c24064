"""Inference jobs: every change of state, as the admin API and the predictor hosts make them.

- **add**: a STARTING job serving its member trials as version "v1" (the admin API);
- **take over**: a RUNNING job whose lease nobody holds lost its predictor, so a host
  leases it and sets it STARTING again (no URL), to start a predictor for it;
- **serving**: STARTING → RUNNING with ``predictor_url``, by the host holding its lease;
- **fail**: STARTING or RUNNING → ERRORED, by that host, when its predictor ended (the
  lease is released with it);
- **stop**: → STOPPED, a user's word (the admin API); the host then kills the predictor;
- **delete**: a finished job goes with its members (the admin API, which deletes its
  request logs too).

Every write is conditional on the state it leaves, and a host's writes on its lease
too, so a late writer never overwrites a STOPPED job, nor a host one another took.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from baobab.enums import InferenceJobStatus
from baobab.store._db._engine import changed_rows
from baobab.store._db._inference_revisions import LIVE, first_inference_revision
from baobab.store._db._leases import RELEASED, Lease
from baobab.store._db._tables import InferenceJob

__all__ = [
    "add_inference_job",
    "delete_finished_inference_job",
    "fail_inference_job",
    "mark_inference_job_stopped",
    "serve_inference_job",
    "take_over_inference_jobs",
]


def add_inference_job(
    session: Session,
    *,
    owner_id: int,
    train_job_id: int,
    api_key_hash: str,
    public: bool,
    trial_ids: Iterable[int],
    request_log_rate: float = 0.0,
) -> InferenceJob:
    """Add a STARTING inference job serving the trials ``trial_ids`` (revision 1: one version, "v1"); flushed."""
    job = InferenceJob(
        owner_id=owner_id,
        train_job_id=train_job_id,
        status=InferenceJobStatus.STARTING,
        api_key_hash=api_key_hash,
        public=public,
        request_log_rate=request_log_rate,
    )
    session.add(job)
    session.flush()
    first_inference_revision(session, job, list(trial_ids))
    return job


def mark_inference_job_stopped(session: Session, job_id: int, *, now: datetime) -> bool:
    """→ STOPPED at ``now``, unless it is finished already (then it keeps its final state); True if it changed."""
    statement = (
        update(InferenceJob)
        .where(InferenceJob.id == job_id, InferenceJob.status.in_(LIVE))
        .values(status=InferenceJobStatus.STOPPED, stopped_at=now)
        .execution_options(synchronize_session=False)
    )
    return bool(changed_rows(session, statement))


def take_over_inference_jobs(
    session: Session, lease: Lease, *, now: datetime, job_ids: Collection[int] | None = None
) -> int:
    """Lease the RUNNING jobs nobody serves (of ``job_ids``, when given) and set them STARTING; how many.

    Their lease was released, or another host's ran out: that host's predictors are
    gone. A job this host serves itself keeps running.
    """
    statement = update(InferenceJob).where(
        InferenceJob.status == InferenceJobStatus.RUNNING, lease.lapsed_elsewhere(now)
    )
    if job_ids is not None:
        statement = statement.where(InferenceJob.id.in_(job_ids))
    statement = statement.values(status=InferenceJobStatus.STARTING, predictor_url=None, **lease.taken(now))
    return changed_rows(session, statement)


def serve_inference_job(session: Session, job_id: int, lease: Lease, url: str) -> bool:
    """STARTING → RUNNING at ``url``, while ``lease`` holds it; False when it was stopped (or taken) meanwhile."""
    statement = (
        update(InferenceJob)
        .where(InferenceJob.id == job_id, InferenceJob.status == InferenceJobStatus.STARTING, lease.held())
        .values(status=InferenceJobStatus.RUNNING, predictor_url=url, error=None)
    )
    return bool(changed_rows(session, statement))


def fail_inference_job(session: Session, job_id: int, lease: Lease, error: str, *, now: datetime) -> bool:
    """STARTING or RUNNING → ERRORED with ``error``, its lease released, while ``lease`` holds it."""
    statement = (
        update(InferenceJob)
        .where(InferenceJob.id == job_id, InferenceJob.status.in_(LIVE), lease.held())
        .values(status=InferenceJobStatus.ERRORED, error=error, predictor_url=None, stopped_at=now, **RELEASED)
    )
    return bool(changed_rows(session, statement))


def delete_finished_inference_job(session: Session, job_id: int) -> bool:
    """Delete job ``job_id`` and its members if it is STOPPED or ERRORED; False if it is missing or live.

    Conditional, so that a job a host just took over (STARTING again) is never deleted under its predictor.
    """
    statement = delete(InferenceJob).where(InferenceJob.id == job_id, InferenceJob.status.not_in(LIVE))
    return bool(changed_rows(session, statement))
