"""``/api/v1/train_jobs``: create, list, read and stop train jobs.

A train job is visible to its owner and to admins; to anyone else it answers 404 like a
missing one (:mod:`baobab.admin._access`). Every role may create jobs (see PLATFORM.md),
and a user who sees a job may stop it (the owner, or an admin). What a new job must be
is checked by :mod:`baobab.admin._train_job_spec`; its trials are listed by
:mod:`baobab.admin._train_job_trials`.

An app is ``(owner, name)``: ``app_version`` counts per owner, so two users who both name
an app ``fraud`` each get version 1 first, and each finds their own by name
(:func:`~baobab.admin._train_job_lookups.find_train_job`; an admin names another user's
app with ``?owner_id=``). Two creations racing for the same version are settled by the
unique ``(owner_id, app, app_version)`` constraint: the loser retries.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer

from baobab.admin._access import ALL_ROLES, private_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._cluster_offer import cluster_offer
from baobab.admin._openapi import api_doc
from baobab.admin._query import INCLUDE_ARG, check_query_args, include_arg
from baobab.admin._state import admin_state
from baobab.admin._train_job_json import TRAIN_JOB_SCHEMA, jobs_json, train_job_json
from baobab.admin._train_job_lookups import OWNER_ARG, OWNER_QUERY, find_train_job, owner_arg
from baobab.admin._train_job_spec import CREATE_SCHEMA, check_train_job_spec, read_train_job_spec
from baobab.exceptions import ConflictError
from baobab.store import Event, EventKind, TrainJob, add_train_job, request_train_job_stop, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("train_jobs", __name__, url_prefix="/api/v1/train_jobs")

_CREATE_ATTEMPTS = 5


@blueprint.post("")
@require_roles(*ALL_ROLES)
@api_doc(
    body=CREATE_SCHEMA,
    responses={
        201: ("the new job, PENDING", TRAIN_JOB_SCHEMA),
        400: "a field is bad; field names it (budget keys as budget.TIME_HOURS, templates as model_ids[i], "
        "options as options.policies.final_trials, a target on an image job as target); a template whose search "
        "cannot be planned within the budget (ENAS) is refused on model_ids[i]",
    },
)
def create_train_job() -> tuple[dict[str, Any], int]:
    """201 with the new job (PENDING, one sub-job per template); JOB_CREATED is published after the commit.

    Job options sent in ``train_args`` (the form before ``options``), and a tabular job's target
    column sent there (the form before ``target``), are still taken, for one release, and the
    answer then carries a ``Deprecation`` header.
    """
    spec = read_train_job_spec()
    me = current_user()
    settings = admin_state().settings

    for attempt in range(_CREATE_ATTEMPTS):
        with session_scope(admin_state().engine) as session:
            offer = cluster_offer(session, settings)
            check_train_job_spec(session, me, spec, cpu_slots=settings.cpu_slots, offer=offer)
            latest = session.scalar(
                select(func.max(TrainJob.app_version)).where(TrainJob.app == spec.app, TrainJob.owner_id == me.id)
            )
            try:
                job = add_train_job(
                    session,
                    owner_id=me.id,
                    app=spec.app,
                    app_version=(latest or 0) + 1,
                    task=spec.task,
                    train_dataset_id=spec.train_dataset_id,
                    val_dataset_id=spec.val_dataset_id,
                    budget=spec.budget.to_json(),
                    train_args=spec.train_args,
                    target=spec.target,
                    options=spec.options.to_json(),
                    seed=spec.seed,
                    sub_jobs=[(model_id, spec.strategy) for model_id in spec.model_ids],
                )
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
@api_doc(
    query={
        "app": {"type": "string", "description": "only the jobs of this app name"},
        INCLUDE_ARG: {"type": "string", "enum": ["train_args"], "description": "heavy fields to include"},
    },
    responses={
        200: (
            "the jobs, newest first",
            {
                "type": "object",
                "required": ["train_jobs"],
                "properties": {"train_jobs": {"type": "array", "items": TRAIN_JOB_SCHEMA}},
            },
        )
    },
)
def list_train_jobs() -> dict[str, Any]:
    """``{"train_jobs": [...]}``, newest first: the caller's own, or all for an admin; ``?app=`` filters.

    Each job comes without its ``train_args`` unless ``?include=train_args`` asks for them.
    """
    check_query_args(("app", INCLUDE_ARG))
    with_train_args = "train_args" in include_arg(("train_args",))
    query = private_rows(select(TrainJob), TrainJob, current_user()).order_by(
        TrainJob.created_at.desc(), TrainJob.id.desc()
    )
    app = request.args.get("app")
    if app is not None:
        query = query.where(TrainJob.app == app)
    with session_scope(admin_state().engine) as session:
        jobs = list(session.scalars(query if with_train_args else query.options(defer(TrainJob.train_args))))
        return {"train_jobs": jobs_json(session, jobs, train_args=with_train_args)}


@blueprint.get("/<app>")
@require_roles(*ALL_ROLES)
@api_doc(query=OWNER_QUERY, responses={200: ("the job", TRAIN_JOB_SCHEMA), 404: "no job of this app"})
def get_latest_train_job(app: str) -> dict[str, Any]:
    """The latest version of ``app`` that the caller may see."""
    check_query_args((OWNER_ARG,))
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, None, owner_id=owner_arg()), session)


@blueprint.get("/<app>/<int:app_version>")
@require_roles(*ALL_ROLES)
@api_doc(query=OWNER_QUERY, responses={200: ("the job", TRAIN_JOB_SCHEMA), 404: "no such job"})
def get_train_job(app: str, app_version: int) -> dict[str, Any]:
    """One version of ``app``; 404 when there is none the caller may see."""
    check_query_args((OWNER_ARG,))
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, app_version, owner_id=owner_arg()), session)


@blueprint.post("/<app>/<int:app_version>/stop")
@require_roles(*ALL_ROLES)
@api_doc(query=OWNER_QUERY, responses={200: ("the job as it is now", TRAIN_JOB_SCHEMA), 404: "no such job"})
def stop_train_job(app: str, app_version: int) -> dict[str, Any]:
    """STOPPING, then JOB_STOPPED; a finished job answers unchanged (and nothing is published).

    The change is conditional (:func:`~baobab.store.request_train_job_stop`), so a driver
    finishing the job at the same moment is never overwritten. Asking again while STOPPING
    publishes again, which does no harm and wakes a driver that missed the first event.
    """
    check_query_args((OWNER_ARG,))
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        request_train_job_stop(session, job.id)
        session.refresh(job)
        publish = not job.status.is_finished()
    if publish:
        admin_state().events.publish(Event(EventKind.JOB_STOPPED, job.id))
    with session_scope(admin_state().engine) as session:
        return jobs_json(session, [job])[0]
