"""``/api/v1/inference_jobs/<id>/versions``: what an inference job serves, set declaratively.

A job serves one or more versions: each a name, a set of trials ensembled together
(trained trials of any train job of the job's app and task), and a weight; each request
goes to one version, at random with probability weight / sum of weights, and its answer
names the version. ``PUT`` sets the wanted versions, ``POST .../versions/<name>/promote``
gives one version all the traffic, ``POST .../rollback`` goes back to the versions
before the last change; each is a new revision of the job (``GET .../revisions`` lists
them). The predictor polls the wanted revision, loads and warms the new versions, then
switches to them at once without dropping a request; ``GET .../versions`` shows what is
wanted and what is served, and why a revision could not be served.

The body is checked whole before anything is written: a bad field answers 400 naming
it (``versions[1].weight``), and the versions served stay as they were. Only the job's
owner or an admin may read or change them; to anyone else the job answers 404.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint
from sqlalchemy import select
from sqlalchemy.orm import Session

from baobab.admin._access import ADMIN_ROLES
from baobab.admin._auth import require_roles
from baobab.admin._body import check_fields, json_object, number_field
from baobab.admin._inference_lookups import (
    MEMBER_SCHEMA,
    VersionTrials,
    member_json,
    revision_versions,
    visible_inference_job,
)
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._query import check_query_args, int_query_arg
from baobab.admin._servable import MAX_MEMBERS, TRIAL_IDS_SCHEMA, check_servable, trial_id_list
from baobab.admin._state import admin_state
from baobab.admin._train_job_lookups import trial_query
from baobab.exceptions import RequestError
from baobab.store import (
    InferenceJob,
    InferenceRevision,
    SubJob,
    TrainJob,
    Trial,
    UserRole,
    VersionSpec,
    promote_inference_version,
    rollback_inference_revision,
    session_scope,
    set_inference_versions,
)

__all__ = ["MAX_VERSIONS", "MAX_WEIGHT", "blueprint"]

#: The most versions one job serves at once.
MAX_VERSIONS = 8
#: The largest weight (weights are relative: only weight / sum matters).
MAX_WEIGHT = 1_000_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NAME_RULE = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
_FIELDS = ("name", "trial_ids", "weight")
_HISTORY_LIMIT = 200
_ROLES = (UserRole.APP_DEVELOPER, UserRole.MODEL_DEVELOPER, *ADMIN_ROLES)

_VERSION = {
    "type": "object",
    "required": ["name", "weight", "share", "trial_ids", "members"],
    "properties": {
        "name": {"type": "string"},
        "weight": {"type": "number"},
        "share": {"type": "number", "description": "its share of the requests: weight / sum of the weights"},
        "trial_ids": {"type": "array", "items": {"type": "integer"}, "description": "best first"},
        "members": {
            "type": "array",
            "items": MEMBER_SCHEMA,
        },
    },
}
_VERSIONS_SCHEMA = register_schema(
    "InferenceVersions",
    {
        "type": "object",
        "required": [
            "inference_job_id", "status", "revision", "versions", "rollback_to", "error", "served_revision",
            "served_versions", "converged",
        ],
        "properties": {
            "inference_job_id": {"type": "integer"},
            "status": {"type": "string", "description": "the inference job's status"},
            "revision": {"type": "integer", "description": "the wanted revision"},
            "versions": {"type": "array", "items": _VERSION, "description": "the wanted versions"},
            "rollback_to": {
                "type": ["integer", "null"],
                "description": "the revision POST .../rollback goes back to; null: nothing to roll back to",
            },
            "error": {
                "type": ["string", "null"],
                "description": "why the predictor could not serve the wanted revision (it serves the one before)",
            },
            "served_revision": {"type": ["integer", "null"], "description": "null until the predictor serves"},
            "served_versions": {"type": ["array", "null"], "items": _VERSION},
            "converged": {"type": "boolean", "description": "the predictor serves the wanted revision"},
        },
    },
)  # fmt: skip
_SET_BODY = {
    "type": "object",
    "required": ["versions"],
    "properties": {
        "versions": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_VERSIONS,
            "items": {
                "type": "object",
                "required": ["name", "trial_ids"],
                "properties": {
                    "name": {"type": "string", "pattern": f"^{_NAME.pattern}$", "description": _NAME_RULE},
                    "trial_ids": {
                        **TRIAL_IDS_SCHEMA,
                        "description": "trained trials of any train job of the inference job's app and task",
                    },
                    "weight": {"type": "number", "minimum": 0, "maximum": MAX_WEIGHT, "default": 1},
                },
            },
            "description": "the versions wanted, replacing the ones wanted now; the weights must sum above 0",
        }
    },
}
_REVISIONS_SCHEMA = {
    "type": "object",
    "required": ["revisions"],
    "properties": {
        "revisions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["revision", "action", "created_at", "rollback_to", "error", "versions"],
                "properties": {
                    "revision": {"type": "integer"},
                    "action": {"enum": ["CREATE", "ROLLOUT", "PROMOTE", "ROLLBACK"]},
                    "created_at": {"type": "string", "format": "date-time"},
                    "rollback_to": {"type": ["integer", "null"]},
                    "error": {"type": ["string", "null"]},
                    "versions": {"type": "array", "items": _VERSION},
                },
            },
        }
    },
}
_JOB_404 = "no such inference job that the caller may change"
_JOB_409 = "the inference job is STOPPED or ERRORED"

blueprint = Blueprint("inference_versions", __name__, url_prefix="/api/v1/inference_jobs")


@blueprint.get("/<int:job_id>/versions")
@require_roles(*_ROLES)
@api_doc(responses={200: ("the wanted and the served versions", _VERSIONS_SCHEMA), 404: _JOB_404})
def get_versions(job_id: int) -> dict[str, Any]:
    """The versions the inference job wants served, and the ones its predictor serves now."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        return _document(session, visible_inference_job(session, job_id))


@blueprint.put("/<int:job_id>/versions")
@require_roles(*_ROLES)
@api_doc(
    body=_SET_BODY,
    responses={
        200: ("the versions, the new ones wanted (the predictor switches once they are loaded)", _VERSIONS_SCHEMA),
        400: "a bad field, named: versions[i].name, versions[i].weight, versions[i].trial_ids[j], versions",
        404: _JOB_404,
        409: _JOB_409,
    },
)
def set_versions(job_id: int) -> dict[str, Any]:
    """Set the versions the inference job serves and their weights (a new revision, unless nothing changes)."""
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id, change=True)
        wanted = _parse_versions(json_object(fields=_SET_BODY["properties"]).get("versions"))
        _check_trials(session, job, wanted)
        set_inference_versions(session, job_id, wanted, now=datetime.now(UTC))
        return _document(session, job)


@blueprint.post("/<int:job_id>/versions/<name>/promote")
@require_roles(*_ROLES)
@api_doc(
    path={"name": "a version the job wants served now"},
    responses={200: ("the versions: the promoted one alone", _VERSIONS_SCHEMA), 404: _JOB_404, 409: _JOB_409},
)
def promote_version(job_id: int, name: str) -> dict[str, Any]:
    """Serve version ``name`` alone, with all the traffic: a new revision, unless it is so already."""
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id, change=True)
        promote_inference_version(session, job_id, name, now=datetime.now(UTC))
        return _document(session, job)


@blueprint.post("/<int:job_id>/rollback")
@require_roles(*_ROLES)
@api_doc(
    responses={
        200: ("the versions, back to those before the last change", _VERSIONS_SCHEMA),
        404: _JOB_404,
        409: f"{_JOB_409}, or it has no earlier versions to go back to",
    },
)
def rollback_versions(job_id: int) -> dict[str, Any]:
    """Go back to the versions the current ones replaced (a new revision holding them); again goes further back."""
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id, change=True)
        rollback_inference_revision(session, job_id, now=datetime.now(UTC))
        return _document(session, job)


@blueprint.get("/<int:job_id>/revisions")
@require_roles(*_ROLES)
@api_doc(
    query={"limit": {"type": "integer", "minimum": 1, "maximum": _HISTORY_LIMIT, "default": 20}},
    responses={200: ("the revisions, newest first", _REVISIONS_SCHEMA), 404: "no such job that the caller may see"},
)
def list_revisions(job_id: int) -> dict[str, Any]:
    """The history of the inference job's versions: every revision, newest first (at most ``limit``)."""
    check_query_args(("limit",))
    limit = int_query_arg("limit", 20, 1, _HISTORY_LIMIT)
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id)
        rows = session.scalars(
            select(InferenceRevision)
            .where(InferenceRevision.inference_job_id == job.id)
            .order_by(InferenceRevision.number.desc())
            .limit(limit)
        ).all()
        versions = revision_versions(session, {(job.id, row.number) for row in rows})
        return {
            "revisions": [
                {
                    "revision": row.number,
                    "action": row.action.value,
                    "created_at": row.created_at.isoformat(),
                    "rollback_to": row.parent,
                    "error": row.error,
                    "versions": _versions_json(versions.get((job.id, row.number), [])),
                }
                for row in rows
            ]
        }


def _parse_versions(value: Any) -> list[VersionSpec]:
    """The body's ``versions``, each field checked (see the module docstring)."""
    if value is None:
        raise RequestError(
            '\'versions\' is required: send {"versions": [{"name": "v1", "trial_ids": [...], "weight": 1}, ...]}',
            field="versions",
        )
    if not isinstance(value, list) or not value:
        raise RequestError(f"'versions' must be a non-empty array of versions, got {value!r}", field="versions")
    if len(value) > MAX_VERSIONS:
        raise RequestError(
            f"'versions' has {len(value)} versions, at most {MAX_VERSIONS} are allowed", field="versions"
        )
    wanted: list[VersionSpec] = []
    named: dict[str, int] = {}
    for index, item in enumerate(value):
        at = f"versions[{index}]"
        if not isinstance(item, dict):
            raise RequestError(f"{at} must be an object with {', '.join(_FIELDS)}, got {item!r}", field=at)
        check_fields(item, _FIELDS, at=at)
        name = item.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise RequestError(f"{at}.name must be {_NAME_RULE}, got {name!r}", field=f"{at}.name")
        if name in named:
            raise RequestError(
                f"{at}.name: {name!r} is already the name of versions[{named[name]}]; each version needs its own",
                field=f"{at}.name",
            )
        named[name] = index
        weight = number_field(
            item, "weight", low=0, high=MAX_WEIGHT, default=1.0, at=at, hint=" (only weight / sum matters)"
        )
        trial_ids = trial_id_list(item.get("trial_ids"), f"{at}.trial_ids", hint="")
        wanted.append(VersionSpec(name, weight, tuple(trial_ids)))
    if sum(version.weight for version in wanted) <= 0:
        raise RequestError(
            "the versions' weights sum to 0, so no version would get a request; give at least one a weight above 0 "
            "(each gets weight / sum of the requests)",
            field="versions",
        )
    # Each distinct set of trials runs its own workers: one process per trial.
    workers = sum(len(trials) for trials in {tuple(sorted(v.trial_ids)) for v in wanted})
    if workers > MAX_MEMBERS:
        raise RequestError(
            f"the versions need {workers} inference workers (one per trial of each distinct set of trials); "
            f"at most {MAX_MEMBERS} are allowed",
            field="versions",
        )
    return wanted


def _check_trials(session: Session, job: InferenceJob, wanted: list[VersionSpec]) -> None:
    """Every trial named is a servable trial of a train job of ``job``'s owner, app and task."""
    served = job.train_job
    ids = {trial_id for version in wanted for trial_id in version.trial_ids}
    rows = session.execute(
        trial_query()
        .join(Trial.sub_job)
        .join(SubJob.train_job)
        .add_columns(TrainJob.owner_id, TrainJob.app, TrainJob.task)
        .where(Trial.id.in_(ids))
    ).all()
    found = {trial.id: (trial, owner_id, app, task) for trial, owner_id, app, task in rows}
    for index, version in enumerate(wanted):
        for position, trial_id in enumerate(version.trial_ids):
            field = f"versions[{index}].trial_ids[{position}]"
            trial, owner_id, app, task = found.get(trial_id, (None, None, None, None))
            if trial is None or owner_id != served.owner_id:  # missing or someone else's: one answer
                raise RequestError(f"{field}: app {served.app!r} has no trial with id {trial_id}", field=field)
            if app != served.app:
                raise RequestError(
                    f"{field}: trial {trial_id} is of app {app!r}; a version serves trials of the inference "
                    f"job's app, {served.app!r}",
                    field=field,
                )
            if task is not served.task:
                raise RequestError(
                    f"{field}: trial {trial_id} is of a {task.value} train job; this inference job serves "
                    f"{served.task.value}",
                    field=field,
                )
            check_servable(trial, field)


def _document(session: Session, job: InferenceJob) -> dict[str, Any]:
    """The versions document of ``job``: wanted, served, and where a rollback goes."""
    numbers = {job.revision} | ({job.served_revision} if job.served_revision is not None else set())
    rows = {
        row.number: row
        for row in session.scalars(
            select(InferenceRevision).where(
                InferenceRevision.inference_job_id == job.id, InferenceRevision.number.in_(numbers)
            )
        )
    }
    versions = revision_versions(session, {(job.id, number) for number in numbers})
    wanted = rows[job.revision]
    served = job.served_revision
    return {
        "inference_job_id": job.id,
        "status": job.status.value,
        "revision": job.revision,
        "versions": _versions_json(versions.get((job.id, job.revision), [])),
        "rollback_to": wanted.parent,
        "error": wanted.error,
        "served_revision": served,
        "served_versions": _versions_json(versions.get((job.id, served), [])) if served is not None else None,
        "converged": served == job.revision,
    }


def _versions_json(versions: list[VersionTrials]) -> list[dict[str, Any]]:
    total = sum(version.weight for version in versions)
    return [
        {
            "name": version.name,
            "weight": version.weight,
            "share": version.weight / total if total > 0 else 0.0,
            "trial_ids": [trial.id for trial in version.trials],
            "members": [member_json(trial) for trial in version.trials],
        }
        for version in versions
    ]
