"""``/api/v1/train_jobs``: create, list, read and stop train jobs.

A train job is visible to its owner and to admins; to anyone else it answers 404 like a
missing one (:mod:`baobab.admin._access`). Every role may create jobs (see PLATFORM.md),
and a user who sees a job may stop it (the owner, or an admin). What a new job must be
is checked by :mod:`baobab.admin._train_job_spec`; its trials are listed by
:mod:`baobab.admin._train_job_trials`.

``app_version`` counts per app across owners: the first job of app ``fraud`` is version 1,
the next one anybody creates for ``fraud`` is version 2. Two creations racing for the same
version are settled by the unique ``(app, app_version)`` constraint: the loser retries.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Blueprint, request
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from baobab.admin._access import ALL_ROLES, private_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._openapi import api_doc
from baobab.admin._query import check_query_args
from baobab.admin._state import admin_state
from baobab.admin._train_job_json import jobs_json, train_job_json
from baobab.admin._train_job_lookups import find_train_job
from baobab.admin._train_job_spec import CREATE_SCHEMA, check_train_job_spec, read_train_job_spec
from baobab.exceptions import ConflictError
from baobab.store import Event, EventKind, JobStatus, SubJob, TrainJob, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("train_jobs", __name__, url_prefix="/api/v1/train_jobs")

_CREATE_ATTEMPTS = 5


@blueprint.post("")
@require_roles(*ALL_ROLES)
@api_doc(
    body=CREATE_SCHEMA,
    responses={
        201: ("the new job, PENDING", {"type": "object"}),
        400: "a field is bad; field names it (budget keys as budget.TIME_HOURS, templates as model_ids[i]); "
        "a template whose search cannot be planned within the budget (ENAS) is refused on model_ids[i]",
    },
)
def create_train_job() -> tuple[dict[str, Any], int]:
    """201 with the new job (PENDING, one sub-job per template); JOB_CREATED is published after the commit."""
    spec = read_train_job_spec()
    me = current_user()
    cpu_slots = admin_state().settings.cpu_slots

    for attempt in range(_CREATE_ATTEMPTS):
        with session_scope(admin_state().engine) as session:
            check_train_job_spec(session, me, spec, cpu_slots=cpu_slots)
            latest = session.scalar(select(func.max(TrainJob.app_version)).where(TrainJob.app == spec.app))
            job = TrainJob(
                owner_id=me.id,
                app=spec.app,
                app_version=(latest or 0) + 1,
                task=spec.task,
                train_dataset_id=spec.train_dataset_id,
                val_dataset_id=spec.val_dataset_id,
                budget=spec.budget.to_json(),
                train_args=spec.train_args,
                status=JobStatus.PENDING,
            )
            job.sub_jobs = [
                SubJob(
                    model_template_id=model_id,
                    strategy=spec.strategy,
                    seed=secrets.randbits(63),
                    status=JobStatus.PENDING,
                )
                for model_id in spec.model_ids
            ]
            session.add(job)
            try:
                session.flush()
            except IntegrityError:
                # Another request took this version (or deleted a dataset or template just now): look again.
                session.rollback()
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise ConflictError(
                        f"could not create a version of app {spec.app!r}: other requests kept taking it; try again"
                    ) from None
                continue
            break
    admin_state().events.publish(Event(EventKind.JOB_CREATED, job.id))
    with session_scope(admin_state().engine) as session:
        return jobs_json(session, [job])[0], 201


@blueprint.get("")
@require_roles(*ALL_ROLES)
def list_train_jobs() -> dict[str, Any]:
    """``{"train_jobs": [...]}``, newest first: the caller's own, or all for an admin; ``?app=`` filters."""
    check_query_args(("app",))
    query = private_rows(select(TrainJob), TrainJob, current_user()).order_by(
        TrainJob.created_at.desc(), TrainJob.id.desc()
    )
    app = request.args.get("app")
    if app is not None:
        query = query.where(TrainJob.app == app)
    with session_scope(admin_state().engine) as session:
        jobs = list(session.scalars(query))
        return {"train_jobs": jobs_json(session, jobs)}


@blueprint.get("/<app>")
@require_roles(*ALL_ROLES)
def get_latest_train_job(app: str) -> dict[str, Any]:
    """The latest version of ``app`` that the caller may see."""
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, None), session)


@blueprint.get("/<app>/<int:app_version>")
@require_roles(*ALL_ROLES)
def get_train_job(app: str, app_version: int) -> dict[str, Any]:
    """One version of ``app``; 404 when there is none the caller may see."""
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, app_version), session)


@blueprint.post("/<app>/<int:app_version>/stop")
@require_roles(*ALL_ROLES)
def stop_train_job(app: str, app_version: int) -> dict[str, Any]:
    """STOPPING, then JOB_STOPPED; a finished job answers unchanged (and nothing is published).

    The change is a conditional UPDATE, so a driver finishing the job at the same moment
    is never overwritten. Asking again while STOPPING publishes again, which does no harm
    and wakes a driver that missed the first event.
    """
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version)
        session.execute(
            update(TrainJob)
            .where(TrainJob.id == job.id, TrainJob.status.in_((JobStatus.PENDING, JobStatus.RUNNING)))
            .values(status=JobStatus.STOPPING)
        )
        session.refresh(job)
        publish = not job.status.is_finished()
    if publish:
        admin_state().events.publish(Event(EventKind.JOB_STOPPED, job.id))
    with session_scope(admin_state().engine) as session:
        return jobs_json(session, [job])[0]
