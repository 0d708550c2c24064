"""``/api/v1/inference_jobs/<id>/request_logs``: the requests an inference job's predictor logged, a file per UTC day.

A job created with ``request_log_rate`` > 0 has its predictor log that share of the
requests it answers (:mod:`baobab.predictor._request_log`). Each day's log is JSON
lines, one answered request a line: ``time`` (when it came, UTC), ``latency_ms``,
``queries`` as sent, ``predictions``, and ``members`` (``answered``, ``left_out``).
The store keeps a day in parts (:mod:`baobab.store._request_logs`); the API shows and
sends it as one file. Whoever may see the job (its owner, the admins) may read its logs;
someone else's job answers 404 like a missing one. Deleting the job deletes them.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Blueprint, Response

from baobab.admin._access import ALL_ROLES
from baobab.admin._auth import require_roles
from baobab.admin._downloads import send_joined_artifacts
from baobab.admin._inference_lookups import visible_inference_job
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._query import check_query_args
from baobab.admin._state import admin_state
from baobab.exceptions import NotFoundError, RequestError
from baobab.store import RequestLogDay, parse_log_day, request_log_days, session_scope

__all__ = ["JSON_LINES", "blueprint"]

#: The media type of a day's log.
JSON_LINES = "application/x-ndjson"
_REQUEST_LOG_SCHEMA = register_schema(
    "RequestLog",
    {
        "type": "object",
        "required": ["day", "name", "size_bytes"],
        "properties": {
            "day": {"type": "string", "format": "date", "description": "the UTC day its requests came in"},
            "name": {"type": "string", "description": "the file name a download gets"},
            "size_bytes": {"type": "integer", "minimum": 0},
        },
    },
)

blueprint = Blueprint("request_logs", __name__, url_prefix="/api/v1/inference_jobs")


@blueprint.get("/<int:job_id>/request_logs")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: (
            "the days with logged requests, newest first",
            {
                "type": "object",
                "required": ["request_logs"],
                "properties": {"request_logs": {"type": "array", "items": _REQUEST_LOG_SCHEMA}},
            },
        ),
        404: "no such inference job that the caller may see",
    }
)
def list_request_logs(job_id: int) -> dict[str, Any]:
    """``{"request_logs": [{day, name, size_bytes}]}``, newest first; empty for a job that logs nothing."""
    check_query_args(())
    _check_visible(job_id)
    return {"request_logs": [_log_json(job_id, day) for day in request_log_days(admin_state().artifacts, job_id)]}


@blueprint.get("/<int:job_id>/request_logs/<day>")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"day": "a UTC day, YYYY-MM-DD"},
    responses={
        200: ("the day's log, JSON lines", {"type": "string"}, JSON_LINES),
        400: "day is not a date YYYY-MM-DD (field day)",
        404: "no such inference job that the caller may see, or it logged nothing that day",
    },
)
def download_request_log(job_id: int, day: str) -> Response:
    """One day's log as a JSON-lines download, one answered request a line, in the order they were logged."""
    check_query_args(())
    wanted = _day(day)
    _check_visible(job_id)
    days = request_log_days(admin_state().artifacts, job_id, day=wanted)
    lost = f"inference job {job_id} logged no requests on {wanted.isoformat()} (UTC)"
    if not days:
        raise NotFoundError(lost)
    (found,) = days
    return send_joined_artifacts(
        found.keys, lost=lost, download_name=_log_json(job_id, found)["name"], mimetype=JSON_LINES
    )


def _check_visible(job_id: int) -> None:
    with session_scope(admin_state().engine) as session:
        visible_inference_job(session, job_id)


def _log_json(job_id: int, day: RequestLogDay) -> dict[str, Any]:
    return {
        "day": day.day.isoformat(),
        "name": f"inference-{job_id}-{day.day.isoformat()}.jsonl",
        "size_bytes": day.size_bytes,
    }


def _day(text: str) -> date:
    """The ``day`` path parameter as a date."""
    day = parse_log_day(text)
    if day is not None:
        return day
    raise RequestError(f"day {text!r} is not a date YYYY-MM-DD (a UTC day, as the listing gives it)", field="day")
