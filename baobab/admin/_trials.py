"""``/api/v1/trials``: one trial, its logs, its interim metrics, its parameters and its architecture.

A trial is visible when its train job is (its owner, or an admin); otherwise it answers
404 like a missing one. Every role may read what it sees, and stop a trial it sees.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from baobab.admin._access import ALL_ROLES, private_rows
from baobab.admin._architecture import ARCHITECTURE_SCHEMA
from baobab.admin._auth import current_user, require_roles
from baobab.admin._downloads import send_artifact
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._query import MAX_ID, check_query_args, int_query_arg
from baobab.admin._state import admin_state
from baobab.admin._train_job_json import TRIAL_SCHEMA, fused_group_members, trial_json
from baobab.admin._train_job_lookups import trial_query
from baobab.admin._trial_lineage import lineage_json
from baobab.exceptions import ConflictError, NotFoundError
from baobab.store import Event, EventKind, InterimMetric, SubJob, TrainJob, Trial, TrialLog, session_scope

__all__ = ["blueprint", "find_trial"]

blueprint = Blueprint("trials", __name__, url_prefix="/api/v1/trials")

#: The single-trial answer: a trial with its traceback, phase, lineage and whether it has an
#: architecture (lists leave those out).
TRIAL_DETAIL_SCHEMA = register_schema(
    "TrialDetail",
    {
        "allOf": [
            TRIAL_SCHEMA,
            {
                "type": "object",
                "required": ["traceback", "phase", "lineage", "has_architecture"],
                "properties": {
                    "has_architecture": {
                        "type": "boolean",
                        "description": "GET /trials/<id> only: GET /trials/<id>/architecture has its record",
                    }
                },
            },
        ]
    },
)

_DEFAULT_LOG_LIMIT = 1000
_MAX_LOG_LIMIT = 10_000


def find_trial(session: Session, trial_id: int) -> Trial:
    """The trial ``trial_id`` if the caller may see its job, with what :func:`trial_json` needs loaded.

    Raises:
        NotFoundError: there is no such trial, or the caller may not see it (same message).
    """
    trial = None
    if 1 <= trial_id <= MAX_ID:
        query = trial_query().join(Trial.sub_job).join(SubJob.train_job).where(Trial.id == trial_id)
        query = private_rows(query, TrainJob, current_user())
        trial = session.scalars(query).unique().first()
    if trial is None:
        raise NotFoundError(f"no trial with id {trial_id}")
    return trial


@blueprint.get("/<int:trial_id>")
@require_roles(*ALL_ROLES)
@api_doc(responses={200: ("the trial", TRIAL_DETAIL_SCHEMA), 404: "no such trial that the caller may see"})
def get_trial(trial_id: int) -> dict[str, Any]:
    """The trial, with the full ``traceback`` of an error (null otherwise), its ``phase`` and its ``lineage``.

    ``phase`` is the search phase it ran in (``final`` for the retrain of a best
    configuration; null for a plain trial). ``lineage`` says where its starting weights
    came from: ``from`` is ``scratch``, ``zoo`` (warm-started from a zoo model) or
    ``shared_params``; ``chain`` lists the ancestors, nearest first, each with the trial
    and zoo model it passed through, the similarity and the epochs it trained, or
    ``{"hidden": true}`` for one the caller may not see; ``inherited_epochs`` sums their
    epochs (hidden ones included); ``truncated`` says the chain was cut at 50 ancestors.
    Only this answer carries them: lists of trials leave them out (a recursive query each).
    ``has_architecture`` says whether ``/trials/<id>/architecture`` answers a record.
    ``fused_group`` lists the group's ``members`` here (trials of the same job, like it).
    """
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        trial = find_trial(session, trial_id)
        data = trial_json(trial, traceback=True)
        if trial.fused_group is not None:
            data["fused_group"]["members"] = fused_group_members(session, trial.fused_group)
        data["phase"] = trial.phase
        data["lineage"] = lineage_json(session, trial.id, current_user())
        data["has_architecture"] = trial.architecture is not None
        return data


@blueprint.get("/<int:trial_id>/logs")
@require_roles(*ALL_ROLES)
@api_doc(
    query={
        "after": {"type": "integer", "minimum": 0, "default": 0, "description": "the last log id received"},
        "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LOG_LIMIT, "default": _DEFAULT_LOG_LIMIT},
    },
    responses={
        200: (
            "the log lines after the id after",
            {
                "type": "object",
                "required": ["logs"],
                "properties": {
                    "logs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["id", "time", "line"],
                            "properties": {
                                "id": {"type": "integer"},
                                "time": {"type": "string", "format": "date-time"},
                                "line": {"type": "string"},
                            },
                        },
                    }
                },
            },
        ),
        404: "no such trial that the caller may see",
    },
)
def get_trial_logs(trial_id: int) -> dict[str, Any]:
    """``{"logs": [{id, time, line}]}`` in order: those after log id ``after`` (default 0), at most ``limit``.

    To follow a running trial, ask again with ``after`` = the last id received.
    """
    check_query_args(("after", "limit"))
    after = int_query_arg("after", 0, 0, MAX_ID)
    limit = int_query_arg("limit", _DEFAULT_LOG_LIMIT, 1, _MAX_LOG_LIMIT)
    with session_scope(admin_state().engine) as session:
        trial = find_trial(session, trial_id)
        rows = session.execute(
            select(TrialLog.id, TrialLog.time, TrialLog.line)
            .where(TrialLog.trial_id == trial.id, TrialLog.id > after)
            .order_by(TrialLog.id)
            .limit(limit)
        ).all()
    return {"logs": [{"id": id_, "time": time.isoformat(), "line": line} for id_, time, line in rows]}


@blueprint.get("/<int:trial_id>/metrics")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: (
            "the interim metrics in the order they came",
            {
                "type": "object",
                "required": ["metrics"],
                "properties": {
                    "metrics": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["step", "time", "metrics"],
                            "properties": {
                                "step": {"type": "integer"},
                                "time": {"type": "string", "format": "date-time"},
                                "metrics": {
                                    "type": "object",
                                    "additionalProperties": {"type": ["number", "null"]},
                                    "description": "name → value; null for a non-finite one",
                                },
                            },
                        },
                    }
                },
            },
        ),
        404: "no such trial that the caller may see",
    }
)
def get_trial_metrics(trial_id: int) -> dict[str, Any]:
    """``{"metrics": [{step, time, metrics}]}`` in the order they were reported."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        trial = find_trial(session, trial_id)
        rows = session.execute(
            select(InterimMetric.step, InterimMetric.time, InterimMetric.metrics)
            .where(InterimMetric.trial_id == trial.id)
            .order_by(InterimMetric.id)
        ).all()
    return {"metrics": [{"step": step, "time": time.isoformat(), "metrics": m} for step, time, m in rows]}


@blueprint.get("/<int:trial_id>/params")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: ("the parameters, safetensors", {"type": "string", "format": "binary"}, "application/octet-stream"),
        404: "no such trial that the caller may see, or it kept no parameters",
    }
)
def get_trial_params(trial_id: int) -> Response:
    """The trial's parameters as stored (safetensors), as a download; 404 when it kept none."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        key = find_trial(session, trial_id).params_path
    if key is None:
        raise NotFoundError(f"trial {trial_id} has no parameters (only trials that finished training keep them)")
    return send_artifact(
        key,
        lost=f"the parameters of trial {trial_id} are missing from the artifact store",
        download_name=f"trial-{trial_id}.safetensors",
    )


def _no_architecture(trial: Trial) -> str:
    """Why ``trial`` has no architecture record: it has not finished training, or its template is no space."""
    why = f"trial {trial.id} has no architecture record"
    if not trial.status.is_finished():
        return f"{why} yet: it is {trial.status.value}, and a SpaceModel trial stores one when it finishes training"
    if not trial.status.is_scored():
        return f"{why}: it ended {trial.status.value} without finishing training"
    return f"{why}: its template is not a SpaceModel"


@blueprint.get("/<int:trial_id>/architecture")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: ("the mutation record of the instance the trial trained", ARCHITECTURE_SCHEMA),
        404: "no such trial that the caller may see, its template is not a SpaceModel, or it did not finish training",
    }
)
def get_trial_architecture(trial_id: int) -> dict[str, Any]:
    """The architecture a SpaceModel trial trained: ``{"choices", "graph_key", "nodes"}``.

    ``nodes`` come in the order the graph runs them, each ``{name, op, what, inputs,
    changed, mutator}``: ``changed`` marks the nodes that differ from the space's base
    (replaced, inserted or fed differently), ``mutator`` names the mutator that changed
    it. A trial of an ordinary template, or one that did not finish training, answers
    404 saying which.
    """
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        trial = find_trial(session, trial_id)
        record = trial.architecture
        if record is None:
            raise NotFoundError(_no_architecture(trial))
    return record


@blueprint.post("/<int:trial_id>/stop")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        202: ("the trial as it is now; the job driver stops it shortly", TRIAL_SCHEMA),
        404: "no such trial that the caller may see",
        409: "the trial has finished already",
    }
)
def stop_trial(trial_id: int) -> tuple[dict[str, Any], int]:
    """Ask for one trial to stop: 202, then TRIAL_STOP_REQUESTED is published for the job driver.

    The driver owns a trial's state (it stops a running trial like one past the job's
    deadline, and drops a pending one), so nothing is written here; the trial's status
    says when it is done. A finished trial answers 409.
    """
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        trial = find_trial(session, trial_id)
        if trial.status.is_finished():
            raise ConflictError(
                f"trial {trial_id} is {trial.status.value} already; only a PENDING or RUNNING trial can be stopped"
            )
        answer = trial_json(trial)
    admin_state().events.publish(Event(EventKind.TRIAL_STOP_REQUESTED, trial_id))
    return answer, 202
