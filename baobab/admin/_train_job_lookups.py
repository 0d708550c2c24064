"""Finding train jobs and their trials as the caller may see them; the inference jobs and trial routes reuse these."""

from __future__ import annotations

from sqlalchemy import Select, select, union_all
from sqlalchemy.orm import Session, joinedload

from baobab.admin._access import private_rows
from baobab.admin._auth import current_user
from baobab.admin._query import MAX_ID, int_query_arg
from baobab.exceptions import NotFoundError
from baobab.store import SubJob, TrainJob, Trial, TrialState

__all__ = ["OWNER_ARG", "OWNER_DESCRIPTION", "OWNER_QUERY", "best_trials", "find_train_job", "owner_arg", "trial_query"]

#: The query parameter naming whose app a route means; :data:`OWNER_QUERY` documents it.
OWNER_ARG = "owner_id"
OWNER_DESCRIPTION = "whose app: needed by an admin for another user's app when several users have one of this name"
OWNER_QUERY = {OWNER_ARG: {"type": "integer", "minimum": 1, "description": OWNER_DESCRIPTION}}


def find_train_job(session: Session, app: str, app_version: int | None, *, owner_id: int | None = None) -> TrainJob:
    """The job ``app`` version ``app_version`` (the latest when None) of the caller's apps, or of ``owner_id``'s.

    An app is ``(owner, name)``: two users may use one name. Without ``owner_id`` the
    caller's own app comes first; an admin who has no app of that name gets another
    user's when only one user has it, and is asked to say whose (``?owner_id=``) when
    several do. Anyone else sees their own apps only.

    Raises:
        NotFoundError: there is no such job, the caller may not see it (same message), or
            an admin must name its owner.
    """
    me = current_user()
    query = private_rows(select(TrainJob).where(TrainJob.app == app), TrainJob, me)
    if owner_id is None:
        owners = session.scalars(query.with_only_columns(TrainJob.owner_id).distinct()).all()
        if me.id in owners or not owners:
            owner_id = me.id
        elif len(owners) == 1:
            owner_id = owners[0]
        else:
            raise NotFoundError(
                f"you have no app {app!r}; users {', '.join(map(str, sorted(owners)))} have one: "
                "say whose with ?owner_id="
            )
    query = query.where(TrainJob.owner_id == owner_id)
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


def owner_arg() -> int | None:
    """The ``owner_id`` query parameter of the routes that find a job by app name (see :func:`find_train_job`)."""
    return int_query_arg(OWNER_ARG, None, 1, MAX_ID)


def trial_query() -> Select[Trial]:
    """``SELECT trials`` with their sub-job and its template loaded, so ``trial_json`` works on the rows
    after the session is closed."""
    return select(Trial).options(joinedload(Trial.sub_job).selectinload(SubJob.model_template))


def best_trials(session: Session, job: TrainJob, k: int, *, include_stopped: bool = False) -> list[Trial]:
    """The ``k`` highest-scoring COMPLETED trials of ``job`` that kept parameters, best first.

    A STOPPED trial was cut off mid-training (at the job's deadline, or by early stopping):
    its score counts for the search, but it is not the model its knobs describe, so it is
    served only when ``include_stopped`` asks for it. Ties go to the older trial (lower
    id). The rows come with what ``trial_json`` needs.

    The best ``k`` of each sub-job and state are found apart, then merged: each of those is
    a walk down the index on ``(sub_job_id, status, score)`` that stops after ``k`` rows, where
    one query over the whole job would sort all its trials (a 100,000-trial job: 80 ms).
    """
    states = TrialState.SCORED if include_stopped else (TrialState.COMPLETED,)
    sub_ids = session.scalars(select(SubJob.id).where(SubJob.train_job_id == job.id)).all()
    parts = [
        select(Trial.id, Trial.score)
        .where(
            Trial.sub_job_id == sub_id,
            Trial.status == state,
            Trial.score.is_not(None),
            Trial.params_path.is_not(None),
            Trial.servable.is_(True),  # not downscaled, quick-evaluated or untrained: never a final model
        )
        .order_by(Trial.score.desc(), Trial.id)
        .limit(k)
        .subquery()
        for sub_id in sub_ids
        for state in states
    ]
    if not parts:
        return []
    merged = union_all(*(select(part.c.id, part.c.score) for part in parts)).subquery()
    ids = list(session.scalars(select(merged.c.id).order_by(merged.c.score.desc(), merged.c.id).limit(k)))
    rows = {trial.id: trial for trial in session.scalars(trial_query().where(Trial.id.in_(ids))).unique()}
    return [rows[trial_id] for trial_id in ids]
