"""``/api/v1/worker/trials/<id>/...``: how a cluster worker reports on the trial it runs.

A cluster worker holds no database credentials: it claims a trial, beats, sends interim
metrics and log lines, and stores the outcome through these endpoints, which call the
same trial-row functions a local worker calls on the database
(:mod:`baobab.store._db._trial_rows`). Each request carries the trial's token
(:func:`baobab.store.issue_trial_token`, given to the worker with the trial), which
opens these endpoints for that one trial and nothing else; user tokens do not open them.

A claim the rules refuse is an answer, not an error: ``{"refused": {"status", "reason",
"retry_after_s"}}``. The outcome is published as ``TRIAL_FINISHED`` once stored, and
interim metrics as ``TRIAL_METRICS``.

One request a trial: a finish may bring the interim metrics and log lines its worker had
not sent yet (``metrics``, ``logs``, as ``records`` takes them) and claim the worker's
next trial (``next``: its id, its token, the worker's name), all in one transaction; the
answer carries that claim as ``claim`` answers it. Each part keeps its own rules: the
finish is stored only by the current claim, the next trial is claimed only if the claim
rules allow, and a refusal of one leaves the other as it would be alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, request
from pydantic import Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import aliased

from baobab.admin._architecture import ARCHITECTURE_SCHEMA, architecture_field
from baobab.admin._auth import check_body_trial_token, check_trial_token, public
from baobab.admin._body import check_fields, enum_field, json_object
from baobab.admin._downloads import send_artifact
from baobab.admin._fusion_profile import FUSION_PROFILE_SCHEMA, fusion_profile_field
from baobab.admin._openapi import api_doc, model_schema
from baobab.admin._request_body import RequestBody, Text, body_error, read_body
from baobab.admin._state import admin_state
from baobab.admin._train_job_time import TIME_BREAKDOWN_SCHEMA, time_breakdown_field
from baobab.exceptions import NotFoundError, RequestError
from baobab.store import (
    ClaimRefused,
    Dataset,
    Event,
    EventKind,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialClaim,
    TrialState,
    add_trial_records,
    add_trial_records_in,
    beat_trial,
    claim_trial,
    claim_trial_in,
    finish_trial_in,
    params_key,
    session_scope,
)

__all__ = ["blueprint"]

blueprint = Blueprint("worker", __name__, url_prefix="/api/v1/worker/trials")

#: What a worker may end its trial with, in a stable order for the OpenAPI document.
_FINAL = sorted(TrialState.RUN_OUTCOMES)
#: Rows one records request may carry; a worker sends what piled up since its last request.
_MAX_RECORDS = 10_000
_TIME = {"type": "string", "format": "date-time", "description": "ISO 8601 with a UTC offset"}
_TAKE_OVER_RULE = (
    "take over a trial whose worker went silent; false for a fused group's member, which the job driver requeues "
    "alone instead"
)
_TAKE_OVER = {"type": "boolean", "default": True, "description": _TAKE_OVER_RULE}


class _ClaimBody(RequestBody):
    worker: Text = Field(description="the worker's name, shown on the trial")
    take_over: bool = Field(True, description=_TAKE_OVER_RULE)


class _BeatBody(RequestBody):
    attempt: int = Field(description="the claim's attempt, as the claim gave it")


class _GpuMemory(RequestBody):
    """What a trial's GPU held: read by the driver to decide how many of a job's trials share a GPU."""

    peak_mb: int = Field(ge=0, le=2**31 - 1, description="the peak of the trial process's CUDA allocator, MiB")
    total_mb: int = Field(ge=1, le=2**31 - 1, description="its device's memory, MiB")


_CLAIM_ANSWER = {
    "type": "object",
    "required": ["claim", "refused"],
    "properties": {
        "claim": {"type": ["object", "null"], "description": "what the worker needs to run the trial"},
        "refused": {
            "type": ["object", "null"],
            "required": ["status", "reason", "retry_after_s"],
            "properties": {
                "status": {"enum": [*(state.value for state in TrialState), None]},
                "reason": {"type": "string"},
                "retry_after_s": {"type": ["number", "null"]},
            },
        },
    },
}
_RECORD_FIELDS = {
    "metrics": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["step", "metrics", "time"],
            "properties": {
                "step": {"type": "integer"},
                "metrics": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
                "time": _TIME,
            },
        },
    },
    "logs": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["line", "time"],
            "properties": {"line": {"type": "string"}, "time": _TIME},
        },
    },
}
_RECORDS_BODY = {"type": "object", "properties": _RECORD_FIELDS}
_NEXT_BODY = {
    "type": "object",
    "required": ["trial_id", "token", "worker"],
    "properties": {
        "trial_id": {"type": "integer"},
        "token": {"type": "string", "description": "the next trial's own token"},
        "worker": {"type": "string", "minLength": 1},
        "take_over": _TAKE_OVER,
    },
}
_UNSENT = "interim rows not sent yet, stored before the outcome (as records takes them)"
_TEXTS = ("params_path", "error", "traceback", "log_line")
_FINISH_BODY = {
    "type": "object",
    "required": ["attempt", "status"],
    "properties": {
        "attempt": {"type": "integer"},
        "status": {"enum": [state.value for state in _FINAL]},
        "score": {"type": ["number", "null"], "description": "required for COMPLETED and STOPPED"},
        "architecture": {
            "anyOf": [ARCHITECTURE_SCHEMA, {"type": "null"}],
            "description": "a SpaceModel trial's mutation record; COMPLETED and STOPPED only",
        },
        "fusion_profile": {
            "anyOf": [FUSION_PROFILE_SCHEMA, {"type": "null"}],
            "description": "the claim's fusion_profile request with what the worker measured, whatever the state",
        },
        "time_breakdown": {
            "anyOf": [TIME_BREAKDOWN_SCHEMA, {"type": "null"}],
            "description": "the seconds the run spent per phase, whatever the state",
        },
        "gpu_memory": {
            "anyOf": [model_schema(_GpuMemory), {"type": "null"}],
            "description": "on a GPU: the peak and total MiB of its memory, whatever the state",
        },
        "params_path": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "traceback": {"type": ["string", "null"]},
        "log_line": {"type": ["string", "null"]},
        **{
            name: {
                **schema,
                "description": "interim rows not sent yet, stored before the outcome (as records takes them)",
            }
            for name, schema in _RECORD_FIELDS.items()
        },
        "next": {**_NEXT_BODY, "description": "the worker's next trial, claimed in the same transaction"},
    },
}
_BINARY = {"type": "string", "format": "binary"}


def _int_field(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name!r} must be an integer", field=name)
    return value


def _optional(body: dict[str, Any], name: str, check: Callable[[Any], bool], expected: str) -> Any:
    value = body.get(name)
    if value is not None and not check(value):
        raise RequestError(f"{name!r} must be {expected} or null", field=name)
    return value


def _gpu_memory(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RequestError("'gpu_memory' must be an object of peak_mb and total_mb, or null", field="gpu_memory")
    try:
        return _GpuMemory.model_validate(value).model_dump()
    except ValidationError as e:
        error = body_error(e, _GpuMemory)
        raise RequestError(f"gpu_memory: {error}", field="gpu_memory") from None


def _time(row: dict[str, Any], where: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(row["time"])
    except (KeyError, TypeError, ValueError):
        raise RequestError(f"{where}.time must be an ISO 8601 time with a UTC offset", field=where) from None
    if stamp.tzinfo is None:
        raise RequestError(f"{where}.time has no UTC offset", field=where)
    return stamp.astimezone(UTC)


def _rows(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    rows = body.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise RequestError(f"{name!r} must be a list of objects", field=name)
    return rows


def _metric_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for i, row in enumerate(_rows(body, "metrics")):
        where = f"metrics[{i}]"
        step, values = row.get("step"), row.get("metrics")
        if isinstance(step, bool) or not isinstance(step, int):
            raise RequestError(f"{where}.step must be an integer", field=where)
        if not isinstance(values, dict) or not all(
            isinstance(k, str) and (v is None or (isinstance(v, int | float) and not isinstance(v, bool)))
            for k, v in values.items()
        ):
            raise RequestError(f"{where}.metrics must map names to numbers (null for a non-finite one)", field=where)
        rows.append({"step": step, "metrics": values, "time": _time(row, where)})
    return rows


def _log_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for i, row in enumerate(_rows(body, "logs")):
        where = f"logs[{i}]"
        if not isinstance(row.get("line"), str):
            raise RequestError(f"{where}.line must be a string", field=where)
        rows.append({"line": row["line"], "time": _time(row, where)})
    return rows


def _stale_after_s(take_over: bool) -> float | None:
    """How long a RUNNING trial must have been silent to be taken over by this claim (None: never)."""
    return admin_state().settings.heartbeat_timeout_s if take_over else None


def _take_over(body: dict[str, Any], where: str = "") -> bool:
    take_over = body.get("take_over", True)
    if not isinstance(take_over, bool):
        raise RequestError(f"'{where}take_over' must be true or false", field=f"{where}take_over")
    return take_over


def _claim_answer(trial_id: int, result: TrialClaim | ClaimRefused) -> dict[str, Any]:
    """A claim as the worker gets it; a trial a take-over just gave up on is published as finished."""
    if isinstance(result, ClaimRefused):
        status = None if result.status is None else result.status.value
        if result.status in _FINAL:  # a take-over gave up on it just now: the advisor must hear of it
            admin_state().events.publish(Event(EventKind.TRIAL_FINISHED, trial_id))
        refused = {"status": status, "reason": result.reason, "retry_after_s": result.retry_after_s}
        return {"claim": None, "refused": refused}
    return {"claim": result.to_json(), "refused": None}


@blueprint.post("/<int:trial_id>/claim")
@public
@api_doc(
    summary="Claim a trial for a worker (trial token)",
    body=model_schema(_ClaimBody),
    responses={200: ("the claim, or why it was refused", _CLAIM_ANSWER)},
)
def claim(trial_id: int) -> dict[str, Any]:
    """Set the trial RUNNING for the worker, or say why not (finished, or running on a live worker)."""
    check_trial_token(trial_id)
    body = read_body(_ClaimBody)
    stale_after_s = _stale_after_s(body.take_over)
    result = claim_trial(
        admin_state().engine, trial_id, body.worker, now=datetime.now(UTC), stale_after_s=stale_after_s
    )
    return _claim_answer(trial_id, result)


@blueprint.post("/<int:trial_id>/beat")
@public
@api_doc(
    summary="Heartbeat of a running trial (trial token)",
    body=model_schema(_BeatBody),
    responses={
        200: (
            "whether the claim is current, and why to stop if so asked",
            {
                "type": "object",
                "required": ["current", "stop_reason"],
                "properties": {"current": {"type": "boolean"}, "stop_reason": {"type": ["string", "null"]}},
            },
        )
    },
)
def beat(trial_id: int) -> dict[str, Any]:
    """Refresh the heartbeat; answers whether the claim is still current and any stop reason."""
    check_trial_token(trial_id)
    current, stop_reason = beat_trial(
        admin_state().engine, trial_id, read_body(_BeatBody).attempt, now=datetime.now(UTC)
    )
    return {"current": current, "stop_reason": stop_reason}


@blueprint.post("/<int:trial_id>/records")
@public
@api_doc(
    summary="Interim metrics and log lines of a running trial (trial token)",
    body=_RECORDS_BODY,
    responses={
        200: (
            "how many rows were stored",
            {"type": "object", "required": ["stored"], "properties": {"stored": {"type": "integer"}}},
        )
    },
)
def records(trial_id: int) -> dict[str, Any]:
    check_trial_token(trial_id)
    metrics, logs = _records(json_object(fields=_RECORDS_BODY["properties"]))
    state = admin_state()
    add_trial_records(state.engine, trial_id, metrics, logs)
    if metrics:
        state.events.publish(Event(EventKind.TRIAL_METRICS, trial_id))
    return {"stored": len(metrics) + len(logs)}


def _records(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The interim metrics and log lines of a body, within the rows one request may carry."""
    metrics, logs = _metric_rows(body), _log_rows(body)
    if len(metrics) + len(logs) > _MAX_RECORDS:
        raise RequestError(f"at most {_MAX_RECORDS} rows per request; send the rest in another", field="metrics")
    return metrics, logs


def _next_claim(body: dict[str, Any]) -> tuple[int, str, float | None] | None:
    """The finish's ``next``: the trial to claim (its token checked), the worker, the take-over rule."""
    if body.get("next") is None:
        return None
    nxt = body["next"]
    if not isinstance(nxt, dict):
        raise RequestError("'next' must be an object: the next trial's trial_id, token and worker", field="next")
    check_fields(nxt, _NEXT_BODY["properties"], at="next")
    trial_id = nxt.get("trial_id")
    if isinstance(trial_id, bool) or not isinstance(trial_id, int) or trial_id < 1:
        raise RequestError("'next.trial_id' must be a positive integer", field="next.trial_id")
    token = nxt.get("token")
    if not isinstance(token, str) or not token:
        raise RequestError("'next.token' must be the next trial's token, a string", field="next.token")
    worker = nxt.get("worker")
    if not isinstance(worker, str) or not worker.strip():
        raise RequestError("'next.worker' must be a non-blank string", field="next.worker")
    check_body_trial_token(trial_id, token, "next.token")
    return trial_id, worker, _stale_after_s(_take_over(nxt, "next."))


@blueprint.post("/<int:trial_id>/finish")
@public
@api_doc(
    summary="Store a trial's outcome, with its last records, and claim the worker's next trial (trial token)",
    body=_FINISH_BODY,
    responses={
        200: (
            "the state the trial has now, and the next trial's claim when one was asked for",
            {
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": {"enum": [*(state.value for state in TrialState), None]},
                    "next": {**_CLAIM_ANSWER, "description": "present when the body had 'next'"},
                },
            },
        )
    },
)
def finish(trial_id: int) -> dict[str, Any]:
    """Store the final state while the claim is current; answers the state the trial has now."""
    check_trial_token(trial_id)
    body = json_object(fields=_FINISH_BODY["properties"])
    attempt = _int_field(body, "attempt")
    status = enum_field(body, "status", TrialState)
    if status not in _FINAL:
        raise RequestError(f"'status' must be one of {', '.join(s.value for s in _FINAL)}", field="status")
    score = _optional(
        body, "score", lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v), "a number"
    )
    if status.is_scored() and score is None:
        raise RequestError(f"a {status.value} trial needs a 'score'", field="score")
    architecture = architecture_field(body, "architecture")
    if architecture is not None and not status.is_scored():
        raise RequestError(
            f"'architecture' comes only with COMPLETED and STOPPED (trials that finished training), not {status.value}",
            field="architecture",
        )
    fusion_profile = fusion_profile_field(body, "fusion_profile")
    time_breakdown = time_breakdown_field(body, "time_breakdown")
    gpu_memory = _gpu_memory(body.get("gpu_memory"))
    texts = {name: _optional(body, name, lambda v: isinstance(v, str), "a string") for name in _TEXTS}
    metrics, logs = _records(body)
    nxt = _next_claim(body)
    state = admin_state()
    now = datetime.now(UTC)
    claimed: TrialClaim | ClaimRefused | None = None
    with session_scope(state.engine) as session:
        add_trial_records_in(session, trial_id, metrics, logs)
        now_status = finish_trial_in(
            session,
            trial_id,
            attempt,
            status,
            now=now,
            score=None if score is None else float(score),
            architecture=architecture,
            fusion_profile=fusion_profile,
            time_breakdown=time_breakdown,
            gpu_memory=gpu_memory,
            **texts,
        )
        if nxt is not None:
            next_id, worker, stale_after_s = nxt
            claimed = claim_trial_in(session, next_id, worker, now=now, stale_after_s=stale_after_s)
    if metrics:
        state.events.publish(Event(EventKind.TRIAL_METRICS, trial_id))
    if now_status is status:
        state.events.publish(Event(EventKind.TRIAL_FINISHED, trial_id))
    answer: dict[str, Any] = {"status": None if now_status is None else now_status.value}
    if nxt is not None:
        assert claimed is not None
        answer["next"] = _claim_answer(nxt[0], claimed)
    return answer


# -- the artifacts of one trial -------------------------------------------------------------

_TRAIN, _VAL = aliased(Dataset), aliased(Dataset)


def _inputs(trial_id: int) -> set[str]:
    """The artifact keys trial ``trial_id`` may read: its template, datasets and shared parameters.

    A local worker confined to its own folder reads nothing else; these routes are
    how it gets what its trial needs and no other user's artifacts.
    """
    query = (
        select(ModelTemplate.artifact_path, _TRAIN.artifact_path, _VAL.artifact_path, Trial.shared_params_path)
        .select_from(Trial)
        .join(SubJob, SubJob.id == Trial.sub_job_id)
        .join(TrainJob, TrainJob.id == SubJob.train_job_id)
        .join(ModelTemplate, ModelTemplate.id == SubJob.model_template_id)
        .join(_TRAIN, _TRAIN.id == TrainJob.train_dataset_id)
        .join(_VAL, _VAL.id == TrainJob.val_dataset_id)
        .where(Trial.id == trial_id)
    )
    with session_scope(admin_state().engine) as session:
        row = session.execute(query).first()
    return set() if row is None else {key for key in row if key}


def _key_arg() -> str:
    key = request.args.get("key", "")
    if not key:
        raise RequestError("the query needs 'key': the artifact key", field="key")
    return key


@blueprint.get("/<int:trial_id>/artifact")
@public
@api_doc(
    summary="Read an input of a trial: its template, a dataset or its shared parameters (trial token)",
    query={"key": {"type": "string", "required": True, "description": "the artifact key the claim named"}},
    responses={200: ("the artifact's bytes", _BINARY, "application/octet-stream"), 404: "not an input of the trial"},
)
def read_artifact(trial_id: int) -> Response:
    check_trial_token(trial_id)
    key = _key_arg()
    if key not in _inputs(trial_id):
        raise NotFoundError(f"trial {trial_id} has no input {key!r}")
    return send_artifact(key, lost=f"{key!r} is missing from the artifact store")


@blueprint.put("/<int:trial_id>/params")
@public
@api_doc(
    summary="Store a trial's parameters, safetensors bytes as the body (trial token)",
    body=_BINARY,
    body_type="application/octet-stream",
    responses={
        200: (
            "where they are stored",
            {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}}},
        )
    },
)
def put_params(trial_id: int) -> dict[str, Any]:
    check_trial_token(trial_id)
    key = params_key(trial_id)
    admin_state().artifacts.put_stream(key, iter(lambda: request.stream.read(1 << 20), b""))
    return {"key": key}


@blueprint.delete("/<int:trial_id>/params")
@public
@api_doc(
    summary="Delete the parameters of a trial that ended otherwise (trial token)",
    responses={
        200: (
            "whether there were any",
            {"type": "object", "required": ["deleted"], "properties": {"deleted": {"type": "boolean"}}},
        )
    },
)
def delete_params(trial_id: int) -> dict[str, Any]:
    check_trial_token(trial_id)
    return {"deleted": admin_state().artifacts.delete(params_key(trial_id))}
