"""Where a train job's time went: the seconds its trials spent per phase (``baobab.enums.TimePhase``).

A worker measures each phase of a trial's run with a monotonic clock and sends the
seconds with the trial's final state (``time_breakdown`` of the worker API's finish,
checked here by :func:`time_breakdown_field`: a worker runs templates, so what it sends
is checked, not trusted). Waiting for a slot is the API's own reading of the trial row:
from its creation to its (last) claim. ``GET /api/v1/train_jobs/<app>/<version>/time_breakdown``
sums both over the job's trials, and per sub-job; the job page draws it as a stacked bar.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from flask import Blueprint
from sqlalchemy import select

from baobab.admin._access import ALL_ROLES
from baobab.admin._auth import require_roles
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._query import check_query_args
from baobab.admin._state import admin_state
from baobab.admin._train_job_lookups import OWNER_ARG, OWNER_QUERY, find_train_job, owner_arg
from baobab.enums import TimePhase
from baobab.exceptions import RequestError
from baobab.store import SubJob, Trial, session_scope

__all__ = ["TIME_BREAKDOWN_SCHEMA", "blueprint", "time_breakdown_field"]

blueprint = Blueprint("train_job_time", __name__, url_prefix="/api/v1/train_jobs")

#: The phases a worker measures and sends; waiting is read from the trial's row.
_MEASURED = tuple(phase.value for phase in TimePhase if phase is not TimePhase.WAIT)
_SECONDS = {"type": "number", "minimum": 0}

TIME_BREAKDOWN_SCHEMA = register_schema(
    "TimeBreakdown",
    {
        "type": "object",
        "description": "seconds a trial's run spent per phase, as its worker measured them",
        "properties": {name: _SECONDS for name in _MEASURED},
        "additionalProperties": False,
    },
)
_PHASE_SECONDS = {
    "type": "object",
    "description": "seconds per phase, every phase present (0 when none was spent)",
    "required": [phase.value for phase in TimePhase],
    "properties": {phase.value: _SECONDS for phase in TimePhase},
}
_ANSWER = {
    "type": "object",
    "required": ["phases", "seconds", "total_s", "trials", "sub_jobs"],
    "properties": {
        "phases": {
            "type": "array",
            "items": {"enum": [phase.value for phase in TimePhase]},
            "description": "the phases in the order of a trial's life: wait, fetch (loading the template and "
            "data), warm_start, profile (fusion profiling), build, train, evaluate, store (saving parameters)",
        },
        "seconds": _PHASE_SECONDS,
        "total_s": {**_SECONDS, "description": "the sum of seconds"},
        "trials": {"type": "integer", "minimum": 0, "description": "the trials that started (and so count)"},
        "sub_jobs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sub_job_id", "model_id", "seconds", "total_s", "trials"],
                "properties": {
                    "sub_job_id": {"type": "integer"},
                    "model_id": {"type": "integer"},
                    "seconds": _PHASE_SECONDS,
                    "total_s": _SECONDS,
                    "trials": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
}


def time_breakdown_field(body: dict[str, Any], name: str) -> dict[str, float] | None:
    """``body[name]`` as a trial's time breakdown (see :data:`TIME_BREAKDOWN_SCHEMA`); None when absent or null.

    Raises:
        RequestError: not an object of known phases to finite, non-negative seconds (naming the phase).
    """
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RequestError(f"{name!r} must be an object of phase to seconds or null", field=name)
    for phase, seconds in value.items():
        if phase not in _MEASURED:
            raise RequestError(f"{name}.{phase}: not a phase a worker measures ({', '.join(_MEASURED)})", field=name)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise RequestError(f"{name}.{phase} must be a number of seconds", field=name)
        if seconds < 0:
            raise RequestError(f"{name}.{phase} must not be negative", field=name)
    return {phase: float(seconds) for phase, seconds in value.items()}


class _Sum:
    """Seconds per phase over some trials."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys((phase.value for phase in TimePhase), 0.0)
        self.trials = 0

    def add(self, created_at: datetime, started_at: datetime | None, measured: dict[str, Any] | None) -> None:
        if started_at is None:  # never claimed: still waiting, or cancelled before it ran
            return
        self.trials += 1
        self.seconds[TimePhase.WAIT] += max(0.0, (started_at - created_at).total_seconds())
        for phase, seconds in (measured or {}).items():
            if phase in self.seconds:  # checked when stored; a row written by hand may hold anything
                self.seconds[phase] += float(seconds)

    def json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "total_s": sum(self.seconds.values()), "trials": self.trials}


@blueprint.get("/<app>/<int:app_version>/time_breakdown")
@require_roles(*ALL_ROLES)
@api_doc(tags=("train_jobs",), query=OWNER_QUERY, responses={200: ("where the job's time went", _ANSWER)})
def get_time_breakdown(app: str, app_version: int) -> dict[str, Any]:
    """Where the job's time went: the seconds its trials spent per phase, in all and per sub-job.

    ``wait`` is each started trial's time from its creation to its claim (a retried trial's
    to its last claim); the other phases are what the workers measured of each run (a
    fused group's shared work split evenly between its members), summed over the trials
    that finished. A trial still running counts its wait only.
    """
    check_query_args((OWNER_ARG,))
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        sub_jobs = session.execute(
            select(SubJob.id, SubJob.model_template_id).where(SubJob.train_job_id == job.id).order_by(SubJob.id)
        ).all()
        rows = session.execute(
            select(Trial.sub_job_id, Trial.created_at, Trial.started_at, Trial.time_breakdown)
            .join(Trial.sub_job)
            .where(SubJob.train_job_id == job.id)
        )
        total, per_sub_job = _Sum(), {sub_job_id: _Sum() for sub_job_id, _ in sub_jobs}
        for sub_job_id, created_at, started_at, measured in rows:
            total.add(created_at, started_at, measured)
            per_sub_job[sub_job_id].add(created_at, started_at, measured)
    return {
        "phases": [phase.value for phase in TimePhase],
        **total.json(),
        "sub_jobs": [
            {"sub_job_id": sub_job_id, "model_id": model_id, **per_sub_job[sub_job_id].json()}
            for sub_job_id, model_id in sub_jobs
        ],
    }
