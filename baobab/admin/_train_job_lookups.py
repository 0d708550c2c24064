"""Finding train jobs and their trials as the caller may see them; the inference jobs and trial routes reuse these."""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, joinedload

from baobab.admin._access import private_rows
from baobab.admin._auth import current_user
from baobab.admin._query import MAX_ID
from baobab.exceptions import NotFoundError
from baobab.store import SubJob, TrainJob, Trial, TrialState

__all__ = ["best_trials", "find_train_job", "trial_query"]


def find_train_job(session: Session, app: str, app_version: int | None) -> TrainJob:
    """The job ``app`` version ``app_version`` that the caller may see; the latest one they may see when None.

    Raises:
        NotFoundError: there is no such job, or the caller may not see it (same message).
    """
    query = private_rows(select(TrainJob).where(TrainJob.app == app), TrainJob, current_user())
    if app_version is None:
        job = session.scalars(query.order_by(TrainJob.app_version.desc()).limit(1)).first()
        if job is None:
            raise NotFoundError(f"no train job for app {app!r}")
        return job
    job = None
    if 1 <= app_version <= MAX_ID:
        job = session.scalars(query.where(TrainJob.app_version == app_version)).first()
    if job is None:
        raise NotFoundError(f"no train job {app!r} version {app_version}")
    return job


def trial_query() -> Select[tuple[Trial]]:
    """``SELECT trials`` with their sub-job and its template loaded, so ``trial_json`` works on the rows
    after the session is closed."""
    return select(Trial).options(joinedload(Trial.sub_job).selectinload(SubJob.model_template))


def best_trials(session: Session, job: TrainJob, k: int) -> list[Trial]:
    """The ``k`` highest-scoring COMPLETED or STOPPED trials of ``job`` that kept parameters, best first.

    Ties go to the older trial (lower id). The rows come with what ``trial_json`` needs.
    """
    query = (
        trial_query()
        .join(Trial.sub_job)
        .where(
            SubJob.train_job_id == job.id,
            Trial.status.in_(TrialState.SCORED),
            Trial.params_path.is_not(None),
            Trial.score.is_not(None),
            Trial.servable.is_(True),  # not downscaled, quick-evaluated or untrained: never a final model
        )
        .order_by(Trial.score.desc(), Trial.id)
        .limit(k)
    )
    return list(session.scalars(query).unique())
