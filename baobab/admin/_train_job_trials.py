"""``/api/v1/train_jobs/<app>/<version>/trials``: a job's trials, a page at a time, as changes, or the best.

They answer 404 like the job when the caller may not see it (see :func:`find_train_job`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from flask import Blueprint, Response, request
from sqlalchemy import case, func, select

from baobab.admin._access import ALL_ROLES
from baobab.admin._auth import require_roles
from baobab.admin._openapi import api_doc
from baobab.admin._query import INCLUDE_STOPPED, MAX_ID, bool_query_arg, check_query_args, int_query_arg
from baobab.admin._state import admin_state
from baobab.admin._train_job_json import TRIAL_SCHEMA, trials_json
from baobab.admin._train_job_lookups import OWNER_ARG, OWNER_QUERY, best_trials, find_train_job, owner_arg, trial_query
from baobab.admin._trial_points import POINT_FIELDS, chart_sample, point_rows
from baobab.exceptions import RequestError
from baobab.store import SubJob, Trial, TrialState, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("train_job_trials", __name__, url_prefix="/api/v1/train_jobs")
#: The train jobs' tag in the API document: these routes are part of a job.
_TAGS = ("train_jobs",)

_SORTS = (
    "-score", "score", "number", "-number", "created_at", "-created_at",
    "duration", "-duration", "status", "-status", "worker", "-worker",
)  # fmt: skip
_TRIAL_ARGS = ("page", "per_page", "sort", "status", "model_id", OWNER_ARG)
_MAX_PER_PAGE = 500
_MAX_K = 100
#: ``trials/changes``: the most trials one answer holds (and by default), and the most ``open`` ids a poll may name.
_MAX_CHANGES = 100_000
_DEFAULT_CHANGES = 10_000
_MAX_OPEN = 1_000
#: ``trials/sample``: the most scatter points and parallel-coordinate lines (per template) one may ask for.
_MAX_SAMPLE_POINTS = 20_000
_MAX_SAMPLE_LINES = 5_000


@blueprint.get("/<app>/<int:app_version>/trials")
@require_roles(*ALL_ROLES)
@api_doc(
    tags=_TAGS,
    query={
        "page": {"type": "integer", "minimum": 1, "default": 1},
        "per_page": {"type": "integer", "minimum": 1, "maximum": _MAX_PER_PAGE, "default": 50},
        "sort": {"enum": list(_SORTS), "default": "-score", "description": "'-' sorts descending"},
        "status": {"type": "string", "description": "comma-separated states, e.g. COMPLETED,STOPPED"},
        "model_id": {"type": "integer", "description": "only the trials of this template"},
        **OWNER_QUERY,
    },
    responses={
        200: (
            "one page of trials",
            {
                "type": "object",
                "required": ["trials", "total", "page", "per_page"],
                "properties": {
                    "trials": {"type": "array", "items": TRIAL_SCHEMA},
                    "total": {"type": "integer", "minimum": 0},
                    "page": {"type": "integer", "minimum": 1},
                    "per_page": {"type": "integer", "minimum": 1},
                },
            },
        )
    },
)
def list_trials(app: str, app_version: int) -> dict[str, Any]:
    """``{"trials", "total", "page", "per_page"}``; see PLATFORM.md for the parameters.

    The default order is ``-score``: best first, trials without a score last, ties by id.
    An unknown parameter is refused (a misspelt filter would otherwise show everything).
    """
    check_query_args(_TRIAL_ARGS)
    page = int_query_arg("page", 1, 1, MAX_ID)
    per_page = int_query_arg("per_page", 50, 1, _MAX_PER_PAGE)
    assert page is not None and per_page is not None
    sort = request.args.get("sort", "-score")
    if sort not in _SORTS:
        raise RequestError(f"query parameter 'sort' is {sort!r}; expected one of {', '.join(_SORTS)}", field="sort")
    statuses = _statuses(request.args.get("status"))
    model_id = int_query_arg("model_id", None, 1, MAX_ID)
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        conditions = [SubJob.train_job_id == job.id]
        if statuses is not None:
            conditions.append(Trial.status.in_(statuses))
        if model_id is not None:
            conditions.append(SubJob.model_template_id == model_id)
        # count(*), not count(id): the index on (sub_job_id, status, score) then answers alone.
        total = session.scalar(select(func.count()).select_from(Trial).join(Trial.sub_job).where(*conditions)) or 0
        offset = (page - 1) * per_page
        trials: Sequence[Trial] = []
        if offset < total:
            # The page's ids first, then its rows: the sort then moves ids and keys, not whole
            # trials (their knobs and tracebacks), which on a deep page of a large job is the
            # difference between sorting in memory and on disk.
            order = _order(sort, session.get_bind().dialect.name)
            page_ids = select(Trial.id).join(Trial.sub_job).where(*conditions).order_by(*order)
            ids = list(session.scalars(page_ids.offset(offset).limit(per_page)))
            rows = {trial.id: trial for trial in session.scalars(trial_query().where(Trial.id.in_(ids))).unique()}
            trials = [rows[trial_id] for trial_id in ids]
        return {"trials": trials_json(session, trials), "total": total, "page": page, "per_page": per_page}


_POINT_SCHEMA = {
    "type": "array",
    "description": "a trial as the job page's charts need it: its " + ", ".join(POINT_FIELDS) + ", in this order "
    "(the answer's fields): integers, the status (one of " + ", ".join(TrialState) + "), the score and "
    "finished_at (seconds since the epoch) or null, then the knobs and the policies as objects",
    # Each place's own type would be prefixItems, which schemathesis (test_schemathesis) refuses as invalid.
    "items": {"type": ["number", "string", "object", "null"]},
    "minItems": len(POINT_FIELDS),
    "maxItems": len(POINT_FIELDS),
}


@blueprint.get("/<app>/<int:app_version>/trials/changes")
@require_roles(*ALL_ROLES)
@api_doc(
    tags=_TAGS,
    query={
        "after_id": {"type": "integer", "minimum": 0, "description": "the last_id of the previous answer (0 at first)"},
        "open": {
            "type": "string",
            "description": f"comma-separated ids of trials last seen PENDING or RUNNING (at most {_MAX_OPEN})",
            "example": "41,42",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_CHANGES,
            "default": _DEFAULT_CHANGES,
            "description": "most new trials",
        },
        **OWNER_QUERY,
    },
    responses={
        200: (
            "the trials above after_id (in id order, at most limit; more says whether others follow) and the "
            "open ones as they are now, each an array of the fields named in fields",
            {
                "type": "object",
                "required": ["fields", "trials", "last_id", "more"],
                "properties": {
                    "fields": {"type": "array", "items": {"type": "string"}},
                    "trials": {"type": "array", "items": _POINT_SCHEMA},
                    "last_id": {"type": "integer", "description": "after_id for the next poll"},
                    "more": {"type": "boolean"},
                },
            },
        ),
        400: "a parameter is not a whole number in range, or open names too many ids",
        404: "no such job that the caller may see",
    },
)
def trial_changes(app: str, app_version: int) -> Response:
    """What changed in a job's trials since the last poll: the job page polls this instead of every trial.

    A finished trial never changes again, so a poll needs only the trials created since
    (ids above ``after_id``) and the ones that were not finished then (``open``). The
    trials of a job are inserted one at a time by the one driver that holds the job, so
    their ids grow in the order they are committed and none is skipped. Each trial is an
    array, not an object: a large job's first read holds every trial, and the names
    would be half of it.
    """
    check_query_args(("after_id", "open", "limit", OWNER_ARG))
    after_id = int_query_arg("after_id", 0, 0, MAX_ID)
    limit = int_query_arg("limit", _DEFAULT_CHANGES, 1, _MAX_CHANGES)
    assert after_id is not None and limit is not None
    open_ids = _open_ids(request.args.get("open"))
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        new = point_rows(session, job.id, [Trial.id > after_id], limit=limit + 1)
        again = point_rows(session, job.id, [Trial.id.in_(open_ids), Trial.id <= after_id]) if open_ids else []
    more = len(new) > limit
    new = new[:limit]
    last_id = new[-1][0] if new else after_id
    points = ",".join(text for _, text in [*again, *new])
    body = f'{{"fields":{json.dumps(POINT_FIELDS)},"trials":[{points}],"last_id":{last_id},"more":{json.dumps(more)}}}'
    return Response(body, mimetype="application/json")


@blueprint.get("/<app>/<int:app_version>/trials/sample")
@require_roles(*ALL_ROLES)
@api_doc(
    tags=_TAGS,
    query={
        "points": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_SAMPLE_POINTS,
            "default": 2000,
            "description": "about how many trials the score scatter keeps (the best of each cell of a grid)",
        },
        "lines": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_SAMPLE_LINES,
            "default": 600,
            "description": "parallel-coordinate lines per template: the best quarter and an even sample of the rest",
        },
        **OWNER_QUERY,
    },
    responses={
        200: (
            "the trials the job page's charts draw, as trials/changes sends them: every trial that raised the best "
            "score, the best of each scatter cell, the parallel-coordinate lines, and every PENDING or RUNNING trial; "
            "last_id is after_id for the changes that follow, omitted the scored trials left out per template id",
            {
                "type": "object",
                "required": ["fields", "trials", "last_id", "omitted"],
                "properties": {
                    "fields": {"type": "array", "items": {"type": "string"}},
                    "trials": {"type": "array", "items": _POINT_SCHEMA},
                    "last_id": {"type": "integer", "description": "the job's highest trial id when it was read"},
                    "omitted": {
                        "type": "object",
                        "additionalProperties": {"type": "integer", "minimum": 0},
                        "description": "per template id: its trials with a score not in trials",
                    },
                },
            },
        ),
        400: "points or lines is not a whole number in range",
        404: "no such job that the caller may see",
    },
)
def trial_sample(app: str, app_version: int) -> Response:
    """The trials of a job that its page's charts draw, chosen by the database: a large job's first read.

    The charts draw a few thousand of a 100,000-trial job's trials; reading all of them
    made the page wait seconds (``bench/web_large_job.py``). The page reads this once,
    then follows ``trials/changes`` from ``last_id``, naming the open trials it holds.
    """
    check_query_args(("points", "lines", OWNER_ARG))
    points = int_query_arg("points", 2000, 1, _MAX_SAMPLE_POINTS)
    lines = int_query_arg("lines", 600, 1, _MAX_SAMPLE_LINES)
    assert points is not None and lines is not None
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        sample = chart_sample(session, job.id, points=points, lines=lines)
    body = (
        f'{{"fields":{json.dumps(POINT_FIELDS)},"trials":[{",".join(text for _, text in sample.points)}],'
        f'"last_id":{sample.last_id},"omitted":{json.dumps({str(k): v for k, v in sample.omitted.items()})}}}'
    )
    return Response(body, mimetype="application/json")


@blueprint.get("/<app>/<int:app_version>/best_trials")
@require_roles(*ALL_ROLES)
@api_doc(
    tags=_TAGS,
    query={
        "k": {"type": "integer", "minimum": 1, "maximum": _MAX_K, "default": 2},
        INCLUDE_STOPPED: {
            "type": "boolean",
            "default": False,
            "description": "also trials STOPPED mid-training (at the deadline, or by early stopping)",
        },
        **OWNER_QUERY,
    },
    responses={
        200: (
            "the best trials, best first",
            {
                "type": "object",
                "required": ["trials"],
                "properties": {"trials": {"type": "array", "items": TRIAL_SCHEMA}},
            },
        ),
        404: "no such job that the caller may see",
    },
)
def get_best_trials(app: str, app_version: int) -> dict[str, Any]:
    """``{"trials": [...]}``: the ``k`` (default 2, at most 100) best COMPLETED trials with parameters, best first.

    ``?include_stopped=true`` counts trials STOPPED mid-training too.
    """
    check_query_args(("k", INCLUDE_STOPPED, OWNER_ARG))
    k = int_query_arg("k", 2, 1, _MAX_K)
    assert k is not None
    include_stopped = bool_query_arg(INCLUDE_STOPPED)
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version, owner_id=owner_arg())
        return {"trials": trials_json(session, best_trials(session, job, k, include_stopped=include_stopped))}


def _open_ids(raw: str | None) -> list[int]:
    """The ``open`` query parameter: distinct trial ids, comma-separated."""
    if raw is None or not raw.strip():
        return []
    parts = raw.split(",")
    if len(parts) > _MAX_OPEN:
        raise RequestError(
            f"query parameter 'open' names {len(parts)} trials, at most {_MAX_OPEN} are allowed", field="open"
        )
    ids = set()
    for part in parts:
        part = part.strip()
        if not re.fullmatch(r"[0-9]{1,19}", part) or not 1 <= int(part) <= MAX_ID:
            raise RequestError(
                f"query parameter 'open' holds {part!r}; give comma-separated trial ids, e.g. open=41,42", field="open"
            )
        ids.add(int(part))
    return sorted(ids)


def _statuses(raw: str | None) -> list[TrialState] | None:
    if raw is None:
        return None
    statuses = []
    for part in raw.split(","):
        try:
            statuses.append(TrialState(part.strip()))
        except ValueError:
            valid = ", ".join(TrialState)
            raise RequestError(
                f"query parameter 'status' holds {part.strip()!r}; give comma-separated states among {valid}",
                field="status",
            ) from None
    return statuses


#: ``sort=status`` goes through the life of a trial: what runs now first, what never ran last.
_STATUS_ORDER = (
    TrialState.RUNNING, TrialState.PENDING, TrialState.COMPLETED, TrialState.STOPPED, TrialState.INVALID,
    TrialState.ERRORED, TrialState.CANCELLED,
)  # fmt: skip


def _order(sort: str, dialect: str) -> list[Any]:
    """ORDER BY for ``sort``; rows without the value (no score, no duration, no worker) last either way, ties by id."""
    key = sort.lstrip("-")
    descending = sort.startswith("-")
    if key == "status":
        rank = case({state: i for i, state in enumerate(_STATUS_ORDER)}, value=Trial.status)
        return [rank.desc() if descending else rank, Trial.id]
    if key in ("number", "created_at"):
        column = Trial.number if key == "number" else Trial.created_at
        return [column.desc(), Trial.id.desc()] if descending else [column, Trial.id]
    value: Any = {"score": Trial.score, "worker": Trial.worker}.get(key)
    if value is None:  # duration: SQLite keeps times as text, PostgreSQL subtracts timestamps
        if dialect == "sqlite":
            value = func.julianday(Trial.finished_at) - func.julianday(Trial.started_at)
        else:
            value = Trial.finished_at - Trial.started_at
    # SQLite and PostgreSQL place NULLs differently, hence the explicit IS NULL first.
    return [value.is_(None), value.desc() if descending else value, Trial.id]
