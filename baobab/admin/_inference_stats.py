"""``/api/v1/inference_jobs/<id>/stats``: the last hour of a running job's serving, from its predictor.

The predictor keeps a point per interval (10 s) of requests per second, p50 and p99
latency and mean batch size, sampled from its own counters (:mod:`baobab.predictor._history`),
and answers them at its ``GET /stats``. This route fetches that from the server side,
so that the web UI charts serving health without Grafana and without reaching the
predictor's own port (CORS). Whoever may see the job (its owner, the admins) may read
its stats; someone else's job answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

import requests
from flask import Blueprint
from werkzeug.exceptions import BadGateway

from baobab.admin._access import ALL_ROLES
from baobab.admin._auth import require_roles
from baobab.admin._inference_jobs import predictor_unreachable, running_predictor_url
from baobab.admin._inference_lookups import visible_inference_job
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._query import check_query_args
from baobab.admin._state import admin_state
from baobab.store import session_scope

__all__ = ["blueprint"]

#: Seconds to connect to the predictor and to read its answer: /stats is a copy of a list in memory.
_STATS_TIMEOUT_S = (2.0, 5.0)
_NULLABLE_NUMBER = {"type": ["number", "null"], "minimum": 0}
_STATS_SCHEMA = register_schema(
    "InferenceStats",
    {
        "type": "object",
        "required": ["interval_s", "window_s", "points"],
        "properties": {
            "interval_s": {"type": "number", "description": "seconds between two points"},
            "window_s": {"type": "number", "description": "how far back the points go (an hour)"},
            "points": {
                "type": "array",
                "description": "one per interval, oldest first",
                "items": {
                    "type": "object",
                    "required": ["time", "requests", "requests_per_s", "p50_ms", "p99_ms", "batch_size"],
                    "properties": {
                        "time": {"type": "string", "format": "date-time", "description": "the interval's end"},
                        "requests": {"type": "integer", "minimum": 0, "description": "answered, any status"},
                        "requests_per_s": {"type": "number", "minimum": 0},
                        "p50_ms": {**_NULLABLE_NUMBER, "description": "null when no request was answered"},
                        "p99_ms": _NULLABLE_NUMBER,
                        "batch_size": {**_NULLABLE_NUMBER, "description": "mean queries per batch; null: none"},
                    },
                },
            },
        },
    },
)

blueprint = Blueprint("inference_stats", __name__, url_prefix="/api/v1/inference_jobs")


@blueprint.get("/<int:job_id>/stats")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: ("the last hour of serving, a point per interval", _STATS_SCHEMA),
        404: "no such inference job that the caller may see",
        409: "the job is not RUNNING: no predictor counts for it",
        502: "the predictor does not answer",
    }
)
def inference_stats(job_id: int) -> dict[str, Any]:
    """The job's predictor's ``GET /stats``: requests per second, p50/p99 latency and batch size over the last hour."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        url = running_predictor_url(visible_inference_job(session, job_id), "has serving stats")
    try:
        answer = requests.get(f"{url}/stats", timeout=_STATS_TIMEOUT_S)
        if answer.status_code == 200:
            body: dict[str, Any] = answer.json()  # a body that is not JSON raises a RequestException too
            return body
    except requests.RequestException as e:
        raise predictor_unreachable(job_id, e) from None
    raise BadGateway(f"the predictor of inference job {job_id} answered GET /stats with {answer.status_code}")
