"""``/api/v1/train_jobs``: create, list, read and stop train jobs, and page through their trials.

A train job is visible to its owner and to admins; to anyone else it answers 404 like a
missing one, and so do its trials. Every role may create jobs (see PLATFORM.md), and a
user who sees a job may stop it (the owner, or an admin).

``app_version`` counts per app across owners: the first job of app ``fraud`` is version 1,
the next one anybody creates for ``fraud`` is version 2. Two creations racing for the same
version are settled by the unique ``(app, app_version)`` constraint: the loser retries.

A referenced dataset or model template the caller may not see is refused with the same
message as a missing one (``no dataset 7``), so ids reveal nothing.

The lookups other modules reuse (the inference jobs above all): :func:`find_train_job`,
:func:`best_trials`, :func:`trial_json`, :func:`train_job_json`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, request
from sqlalchemy import Select, case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from baobab.admin._auth import current_user, require_roles
from baobab.admin._body import enum_field, json_object, string_field
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._state import admin_state
from baobab.admin._users import ADMIN_ROLES
from baobab.advisor import STRATEGIES, JobOptionsError, parse_budget, parse_job_options
from baobab.exceptions import BudgetError, ConflictError, NotFoundError, RequestError
from baobab.model import Task
from baobab.store import (
    Dataset,
    Event,
    EventKind,
    JobStatus,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    User,
    UserRole,
    session_scope,
)

__all__ = [
    "MAX_ID",
    "best_trials",
    "blueprint",
    "check_query_args",
    "find_train_job",
    "int_query_arg",
    "train_job_json",
    "trial_json",
    "trial_query",
]

blueprint = Blueprint("train_jobs", __name__, url_prefix="/api/v1/train_jobs")

_ROLES = (UserRole.MODEL_DEVELOPER, UserRole.APP_DEVELOPER, *ADMIN_ROLES)
_FIELDS = ("app", "task", "train_dataset_id", "val_dataset_id", "model_ids", "budget", "train_args", "strategy")
_APP = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: train() takes these itself (positional parameters, and the seed the platform derives per trial).
_RESERVED_TRAIN_ARGS = ("dataset_path", "shared_params", "seed")
_MAX_MODELS = 100
_CREATE_ATTEMPTS = 5

#: The largest id a row can have; a larger number in a URL or a body names nothing (and
#: would overflow SQLite's integers), so it answers like a missing row.
MAX_ID = 2**63 - 1

_SORTS = (
    "-score", "score", "number", "-number", "created_at", "-created_at",
    "duration", "-duration", "status", "-status", "worker", "-worker",
)  # fmt: skip
_TRIAL_ARGS = ("page", "per_page", "sort", "status", "model_id")
_MAX_PER_PAGE = 500
_MAX_K = 100
#: ``trials/changes``: the most trials one answer holds, and the most ``open`` ids a poll may name.
_MAX_CHANGES = 10_000
_MAX_OPEN = 1_000


# -- the shared lookups ---------------------------------------------------------------------


def find_train_job(session: Session, app: str, app_version: int | None) -> TrainJob:
    """The job ``app`` version ``app_version`` that the caller may see; the latest one they may see when None.

    Raises:
        NotFoundError: there is no such job, or the caller may not see it (same message).
    """
    query = _visible(select(TrainJob).where(TrainJob.app == app), current_user())
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


def trial_query() -> Select[tuple[Trial]]:
    """``SELECT trials`` with their sub-job and its template loaded, so :func:`trial_json` works on the rows
    after the session is closed."""
    return select(Trial).options(joinedload(Trial.sub_job).selectinload(SubJob.model_template))


def best_trials(session: Session, job: TrainJob, k: int) -> list[Trial]:
    """The ``k`` highest-scoring COMPLETED or STOPPED trials of ``job`` that kept parameters, best first.

    Ties go to the older trial (lower id). The rows come with what :func:`trial_json` needs.
    """
    query = (
        trial_query()
        .join(Trial.sub_job)
        .where(
            SubJob.train_job_id == job.id,
            Trial.status.in_(TrialState.SCORED),
            Trial.params_path.is_not(None),
            Trial.score.is_not(None),
            Trial.servable.is_(True),  # not downscaled, quick-evaluated or untrained: never a final model
        )
        .order_by(Trial.score.desc(), Trial.id)
        .limit(k)
    )
    return list(session.scalars(query).unique())


def trial_json(trial: Trial, *, traceback: bool = False) -> dict[str, Any]:
    """A trial as the API shows it; ``traceback`` adds the full text of an error (``GET /trials/<id>``).

    ``trial.sub_job.model_template`` must be loaded (see :func:`trial_query`) or the session open.
    ``duration_s`` is null until the trial has both started and finished. Where the parameters
    are stored stays hidden: ``has_params`` says whether there are any.
    """
    sub_job = trial.sub_job
    data: dict[str, Any] = {
        "id": trial.id,
        "train_job_id": sub_job.train_job_id,
        "sub_job_id": trial.sub_job_id,
        "model_id": sub_job.model_template_id,
        "model_name": sub_job.model_template.name,
        "number": trial.number,
        "knobs": trial.knobs,
        "policies": trial.policies,
        "status": trial.status.value,
        "score": trial.score,
        "created_at": _iso(trial.created_at),
        "started_at": _iso(trial.started_at),
        "finished_at": _iso(trial.finished_at),
        "duration_s": (
            (trial.finished_at - trial.started_at).total_seconds()
            if trial.started_at is not None and trial.finished_at is not None
            else None
        ),
        "worker": trial.worker,
        "attempts": trial.attempts,
        "error": trial.error,
        "has_params": trial.params_path is not None,
        "parent_zoo_model_id": trial.parent_zoo_model_id,
        "similarity": trial.similarity,
    }
    if traceback:
        data["traceback"] = trial.traceback
    return data


def train_job_json(job: TrainJob, session: Session | None = None) -> dict[str, Any]:
    """A train job as the API shows it, with its sub-jobs and trial counts.

    The counts and the best score come from GROUP BY queries, never from loading the
    trials; ``session`` is used when given, else a new one is opened.
    """
    if session is None:
        with session_scope(admin_state().engine) as own:
            return _jobs_json(own, [job])[0]
    return _jobs_json(session, [job])[0]


def int_query_arg(name: str, default: int | None, low: int, high: int) -> int | None:
    """The integer query parameter ``name``, between ``low`` and ``high``; ``default`` when absent.

    Raises:
        RequestError: the value is not a whole number in range (the error names the parameter).
    """
    raw = request.args.get(name)
    if raw is None:
        return default
    value = int(raw) if re.fullmatch(r"[+-]?[0-9]{1,30}", raw.strip()) else None
    if value is None:
        raise RequestError(f"query parameter {name!r} must be a whole number, got {raw!r}", field=name)
    if not low <= value <= high:
        raise RequestError(f"query parameter {name!r} must be between {low} and {high}, got {value}", field=name)
    return value


def check_query_args(known: Iterable[str]) -> None:
    """Refuses a query parameter not in ``known``: a misspelt filter would otherwise be ignored silently.

    Raises:
        RequestError: naming the unknown parameter.
    """
    known = tuple(known)
    for name in request.args:
        if name not in known:
            hint = f"known parameters: {', '.join(known)}" if known else "this endpoint takes none"
            raise RequestError(f"unknown query parameter {name!r}; {hint}", field=name)


# -- routes --------------------------------------------------------------------------------


_CREATE_SCHEMA = {
    "type": "object",
    "required": ["app", "task", "train_dataset_id", "val_dataset_id", "model_ids", "budget"],
    "properties": {
        "app": {"type": "string", "pattern": f"^{_APP.pattern}$", "description": "each job is a new version of it"},
        "task": {"enum": [task.value for task in Task]},
        "train_dataset_id": {"type": "integer"},
        "val_dataset_id": {"type": "integer"},
        "model_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": _MAX_MODELS},
        "budget": {
            "type": "object",
            "description": "GPU_COUNT (0: CPU slots), TIME_HOURS and/or MODEL_TRIAL_COUNT (per template)",
            "properties": {
                "GPU_COUNT": {"type": "integer", "minimum": 0},
                "TIME_HOURS": {"type": "number", "exclusiveMinimum": 0},
                "MODEL_TRIAL_COUNT": {"type": "integer", "minimum": 1},
            },
        },
        "train_args": {
            "type": "object",
            "description": "keyword arguments of train(), and the job options 'early_stopping' "
            '(e.g. {"rule": "asha", "eta": 3}) and \'policies\' (e.g. {"EARLY_STOP": true, "SHARE_PARAMS": "best"})',
        },
        "strategy": {"enum": list(STRATEGIES), "default": "auto", "description": "the advisor's search strategy"},
    },
}


@blueprint.post("")
@require_roles(*_ROLES)
@api_doc(
    body=_CREATE_SCHEMA,
    responses={
        201: ("the new job, PENDING", {"type": "object"}),
        400: "a field is bad; field names it (budget keys as budget.TIME_HOURS, templates as model_ids[i])",
    },
)
def create_train_job() -> tuple[dict[str, Any], int]:
    """201 with the new job (PENDING, one sub-job per template); JOB_CREATED is published after the commit."""
    body = json_object(fields=_FIELDS)
    app = string_field(body, "app")
    if not _APP.fullmatch(app):
        raise RequestError(
            f"'app' is {app!r}; use 1 to 64 letters, digits, '_', '.' or '-' (it appears in URLs)", field="app"
        )
    task = enum_field(body, "task", Task)
    train_id = _id_field(body, "train_dataset_id")
    val_id = _id_field(body, "val_dataset_id")
    model_ids = _model_ids(body)
    budget = _budget(body)
    train_args = _train_args(body)
    try:
        parse_job_options(train_args, trial_count=budget.get("MODEL_TRIAL_COUNT"))
    except JobOptionsError as e:
        raise RequestError(str(e), field=e.field) from None
    strategy = _strategy(body)
    me = current_user()

    for attempt in range(_CREATE_ATTEMPTS):
        with session_scope(admin_state().engine) as session:
            _check_dataset(session, me, train_id, "train_dataset_id", task)
            _check_dataset(session, me, val_id, "val_dataset_id", task)
            for i, model_id in enumerate(model_ids):
                _check_model(session, me, model_id, f"model_ids[{i}]", task)
            latest = session.scalar(select(func.max(TrainJob.app_version)).where(TrainJob.app == app))
            job = TrainJob(
                owner_id=me.id,
                app=app,
                app_version=(latest or 0) + 1,
                task=task,
                train_dataset_id=train_id,
                val_dataset_id=val_id,
                budget=budget,
                train_args=train_args,
                status=JobStatus.PENDING,
            )
            job.sub_jobs = [
                SubJob(
                    model_template_id=model_id, strategy=strategy, seed=secrets.randbits(63), status=JobStatus.PENDING
                )
                for model_id in model_ids
            ]
            session.add(job)
            try:
                session.flush()
            except IntegrityError:
                # Another request took this version (or deleted a dataset or template just now): look again.
                session.rollback()
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise ConflictError(
                        f"could not create a version of app {app!r}: other requests kept taking it; try again"
                    ) from None
                continue
            break
    admin_state().events.publish(Event(EventKind.JOB_CREATED, job.id))
    with session_scope(admin_state().engine) as session:
        return _jobs_json(session, [job])[0], 201


@blueprint.get("")
@require_roles(*_ROLES)
def list_train_jobs() -> dict[str, Any]:
    """``{"train_jobs": [...]}``, newest first: the caller's own, or all for an admin; ``?app=`` filters."""
    check_query_args(("app",))
    query = _visible(select(TrainJob), current_user()).order_by(TrainJob.created_at.desc(), TrainJob.id.desc())
    app = request.args.get("app")
    if app is not None:
        query = query.where(TrainJob.app == app)
    with session_scope(admin_state().engine) as session:
        jobs = list(session.scalars(query))
        return {"train_jobs": _jobs_json(session, jobs)}


@blueprint.get("/<app>")
@require_roles(*_ROLES)
def get_latest_train_job(app: str) -> dict[str, Any]:
    """The latest version of ``app`` that the caller may see."""
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, None), session)


@blueprint.get("/<app>/<int:app_version>")
@require_roles(*_ROLES)
def get_train_job(app: str, app_version: int) -> dict[str, Any]:
    """One version of ``app``; 404 when there is none the caller may see."""
    with session_scope(admin_state().engine) as session:
        return train_job_json(find_train_job(session, app, app_version), session)


@blueprint.post("/<app>/<int:app_version>/stop")
@require_roles(*_ROLES)
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
        return _jobs_json(session, [job])[0]


@blueprint.get("/<app>/<int:app_version>/trials")
@require_roles(*_ROLES)
@api_doc(
    query={
        "page": {"type": "integer", "minimum": 1, "default": 1},
        "per_page": {"type": "integer", "minimum": 1, "maximum": _MAX_PER_PAGE, "default": 50},
        "sort": {"enum": list(_SORTS), "default": "-score", "description": "'-' sorts descending"},
        "status": {"type": "string", "description": "comma-separated states, e.g. COMPLETED,STOPPED"},
        "model_id": {"type": "integer", "description": "only the trials of this template"},
    },
    responses={200: ("one page of trials", {"type": "object", "required": ["trials", "total", "page", "per_page"]})},
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
        job = find_train_job(session, app, app_version)
        conditions = [SubJob.train_job_id == job.id]
        if statuses is not None:
            conditions.append(Trial.status.in_(statuses))
        if model_id is not None:
            conditions.append(SubJob.model_template_id == model_id)
        total = session.scalar(select(func.count(Trial.id)).join(Trial.sub_job).where(*conditions)) or 0
        offset = (page - 1) * per_page
        trials: Sequence[Trial] = []
        if offset < total:
            order = _order(sort, session.get_bind().dialect.name)
            query = trial_query().join(Trial.sub_job).where(*conditions).order_by(*order)
            trials = session.scalars(query.offset(offset).limit(per_page)).unique().all()
        return {"trials": [trial_json(t) for t in trials], "total": total, "page": page, "per_page": per_page}


_TRIAL_POINT_SCHEMA = register_schema(
    "TrialPoint",
    {
        "type": "object",
        "description": "a trial as the job page's charts need it (no timestamps of creation, errors or paths)",
        "properties": {
            "id": {"type": "integer"},
            "number": {"type": "integer"},
            "model_id": {"type": "integer"},
            "status": {"enum": [state.value for state in TrialState]},
            "score": {"type": ["number", "null"]},
            "started_at": {"type": ["string", "null"], "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "knobs": {"type": "object"},
            "policies": {"type": "object"},
            "worker": {"type": ["string", "null"]},
        },
    },
)


@blueprint.get("/<app>/<int:app_version>/trials/changes")
@require_roles(*_ROLES)
@api_doc(
    query={
        "after_id": {"type": "integer", "minimum": 0, "description": "the last_id of the previous answer (0 at first)"},
        "open": {
            "type": "string",
            "description": f"comma-separated ids of trials last seen PENDING or RUNNING (at most {_MAX_OPEN})",
            "example": "41,42",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_CHANGES, "description": "most new trials"},
    },
    responses={
        200: (
            "the trials above after_id (in id order, at most limit; more says whether others follow) and the "
            "open ones as they are now",
            {
                "type": "object",
                "required": ["trials", "last_id", "more"],
                "properties": {
                    "trials": {"type": "array", "items": _TRIAL_POINT_SCHEMA},
                    "last_id": {"type": "integer", "description": "after_id for the next poll"},
                    "more": {"type": "boolean"},
                },
            },
        ),
        400: "a parameter is not a whole number in range, or open names too many ids",
        404: "no such job that the caller may see",
    },
)
def trial_changes(app: str, app_version: int) -> dict[str, Any]:
    """What changed in a job's trials since the last poll: the job page polls this instead of every trial.

    A finished trial never changes again, so a poll needs only the trials created since
    (ids above ``after_id``) and the ones that were not finished then (``open``). The
    trials of a job are inserted one at a time by the one driver that holds the job, so
    their ids grow in the order they are committed and none is skipped.
    """
    check_query_args(("after_id", "open", "limit"))
    after_id = int_query_arg("after_id", 0, 0, MAX_ID)
    limit = int_query_arg("limit", _MAX_CHANGES, 1, _MAX_CHANGES)
    assert after_id is not None and limit is not None
    open_ids = _open_ids(request.args.get("open"))
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version)
        points = (
            select(
                Trial.id, Trial.number, SubJob.model_template_id, Trial.status, Trial.score, Trial.started_at,
                Trial.finished_at, Trial.knobs, Trial.policies, Trial.worker,
            )
            .join(Trial.sub_job)
            .where(SubJob.train_job_id == job.id)
        )  # fmt: skip
        new = session.execute(points.where(Trial.id > after_id).order_by(Trial.id).limit(limit + 1)).all()
        again = []
        if open_ids:
            again = session.execute(points.where(Trial.id.in_(open_ids), Trial.id <= after_id)).all()
    more = len(new) > limit
    new = new[:limit]
    return {
        "trials": [_trial_point(row) for row in [*again, *new]],
        "last_id": new[-1].id if new else after_id,
        "more": more,
    }


@blueprint.get("/<app>/<int:app_version>/best_trials")
@require_roles(*_ROLES)
def get_best_trials(app: str, app_version: int) -> dict[str, Any]:
    """``{"trials": [...]}``: the ``k`` (default 2, at most 100) best trials with parameters, best first."""
    check_query_args(("k",))
    k = int_query_arg("k", 2, 1, _MAX_K)
    assert k is not None
    with session_scope(admin_state().engine) as session:
        job = find_train_job(session, app, app_version)
        return {"trials": [trial_json(t) for t in best_trials(session, job, k)]}


# -- helpers -------------------------------------------------------------------------------


def _visible(query: Select[Any], me: User) -> Select[Any]:
    return query if me.role in ADMIN_ROLES else query.where(TrainJob.owner_id == me.id)


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def _trial_point(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "number": row.number,
        "model_id": row.model_template_id,
        "status": TrialState(row.status).value,
        "score": row.score,
        "started_at": _iso(row.started_at),
        "finished_at": _iso(row.finished_at),
        "knobs": row.knobs,
        "policies": row.policies,
        "worker": row.worker,
    }


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
    TrialState.RUNNING, TrialState.PENDING, TrialState.COMPLETED, TrialState.STOPPED, TrialState.ERRORED,
    TrialState.CANCELLED,
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


def _id_field(body: Mapping[str, Any], name: str) -> int:
    value = body.get(name)
    if value is None:
        raise RequestError(f"{name!r} is required", field=name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name!r} must be an integer id, got {value!r}", field=name)
    return value


def _model_ids(body: Mapping[str, Any]) -> list[int]:
    value = body.get("model_ids")
    if value is None:
        raise RequestError("'model_ids' is required: a list of model template ids", field="model_ids")
    if not isinstance(value, list):
        raise RequestError(f"'model_ids' must be a list of model template ids, got {value!r}", field="model_ids")
    if not value:
        raise RequestError("'model_ids' is empty: give at least one model template id", field="model_ids")
    if len(value) > _MAX_MODELS:
        raise RequestError(f"'model_ids' has {len(value)} ids, at most {_MAX_MODELS} are allowed", field="model_ids")
    seen: dict[int, int] = {}
    for i, model_id in enumerate(value):
        field = f"model_ids[{i}]"
        if isinstance(model_id, bool) or not isinstance(model_id, int):
            raise RequestError(f"{field!r} must be an integer id, got {model_id!r}", field=field)
        if model_id in seen:
            raise RequestError(
                f"model {model_id} is listed twice (model_ids[{seen[model_id]}] and {field}); list each once",
                field=field,
            )
        seen[model_id] = i
    return value


def _budget(body: Mapping[str, Any]) -> dict[str, Any]:
    value = body.get("budget")
    if value is None:
        raise RequestError(
            '\'budget\' is required, e.g. {"MODEL_TRIAL_COUNT": 10} or {"TIME_HOURS": 0.5, "GPU_COUNT": 0}',
            field="budget",
        )
    try:
        return parse_budget(value).to_json()
    except BudgetError as e:
        if e.field == "budget":
            raise RequestError(str(e), field="budget") from None
        raise RequestError(f"budget.{e}", field=f"budget.{e.field}") from None


def _train_args(body: Mapping[str, Any]) -> dict[str, Any]:
    value = body.get("train_args")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(
            f"'train_args' must be an object of train() keyword arguments, got {value!r}", field="train_args"
        )
    for name in value:
        if name in _RESERVED_TRAIN_ARGS:
            raise RequestError(
                f"train_args may not set {name!r}: the platform passes it to train() itself "
                f"({', '.join(_RESERVED_TRAIN_ARGS)} are reserved)",
                field=f"train_args.{name}",
            )
    return value


def _strategy(body: Mapping[str, Any]) -> str:
    value = body.get("strategy")
    if value is None:
        return "auto"
    if value not in STRATEGIES:
        raise RequestError(f"'strategy' is {value!r}; expected one of {', '.join(STRATEGIES)}", field="strategy")
    return str(value)


def _check_dataset(session: Session, me: User, dataset_id: int, field: str, task: Task) -> None:
    dataset = session.get(Dataset, dataset_id) if 1 <= dataset_id <= MAX_ID else None
    if dataset is None or (me.role not in ADMIN_ROLES and dataset.owner_id != me.id):
        raise RequestError(f"no dataset {dataset_id}: give the id of one of your datasets", field=field)
    if dataset.format is not task.dataset_format:
        raise RequestError(
            f"dataset {dataset_id} ({dataset.name!r}) is {dataset.format}; a {task} job needs "
            f"{task.dataset_format} datasets",
            field=field,
        )


def _check_model(session: Session, me: User, model_id: int, field: str, task: Task) -> None:
    model = session.get(ModelTemplate, model_id) if 1 <= model_id <= MAX_ID else None
    if model is None or (
        me.role not in ADMIN_ROLES and model.owner_id != me.id and model.access is not ModelAccess.PUBLIC
    ):
        raise RequestError(f"no model {model_id}: give the id of your own or a PUBLIC model template", field=field)
    if model.task is not task:
        raise RequestError(f"model {model_id} ({model.name!r}) is for {model.task}, not {task}", field=field)


def _jobs_json(session: Session, jobs: Sequence[TrainJob]) -> list[dict[str, Any]]:
    """Job JSON for many jobs in three queries: sub-jobs, trial counts, best scores."""
    if not jobs:
        return []
    ids = [job.id for job in jobs]
    sub_rows = session.execute(
        select(
            SubJob.id,
            SubJob.train_job_id,
            SubJob.model_template_id,
            ModelTemplate.name,
            SubJob.strategy,
            SubJob.status,
            SubJob.error,
        )
        .join(ModelTemplate, SubJob.model_template_id == ModelTemplate.id)
        .where(SubJob.train_job_id.in_(ids))
        .order_by(SubJob.id)
    ).all()
    counts: dict[int, dict[str, int]] = {}  # sub-job id -> state -> n
    for sub_job_id, status, n in session.execute(
        select(Trial.sub_job_id, Trial.status, func.count(Trial.id))
        .join(Trial.sub_job)
        .where(SubJob.train_job_id.in_(ids))
        .group_by(Trial.sub_job_id, Trial.status)
    ):
        counts.setdefault(sub_job_id, {})[TrialState(status).value] = n
    best = dict(
        session.execute(
            select(SubJob.train_job_id, func.max(Trial.score))
            .join(Trial.sub_job)
            .where(SubJob.train_job_id.in_(ids), Trial.status.in_(TrialState.SCORED))
            .group_by(SubJob.train_job_id)
        ).all()
    )
    now = datetime.now(UTC)
    subs: dict[int, list[dict[str, Any]]] = {job_id: [] for job_id in ids}
    for sub_id, job_id, model_id, model_name, strategy, status, error in sub_rows:
        subs[job_id].append(
            {
                "id": sub_id,
                "model_id": model_id,
                "model_name": model_name,
                "strategy": strategy,
                "status": JobStatus(status).value,
                "error": error,
                "trial_counts": _counts([counts.get(sub_id, {})]),
            }
        )
    return [
        {
            "id": job.id,
            "app": job.app,
            "app_version": job.app_version,
            "task": job.task.value,
            "status": job.status.value,
            "error": job.error,
            "train_dataset_id": job.train_dataset_id,
            "val_dataset_id": job.val_dataset_id,
            "budget": job.budget,
            "train_args": job.train_args,
            "owner_id": job.owner_id,
            "created_at": _iso(job.created_at),
            "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at),
            "trial_counts": _counts([counts.get(sub["id"], {}) for sub in subs[job.id]]),
            "best_score": best.get(job.id),
            "budget_used": _budget_used(
                job, sum(sum(counts.get(sub["id"], {}).values()) for sub in subs[job.id]), len(subs[job.id]), now
            ),
            "sub_jobs": subs[job.id],
        }
        for job in jobs
    ]


def _budget_used(job: TrainJob, trials: int, sub_jobs: int, now: datetime) -> dict[str, Any]:
    """What the job has spent of its budget, as the job driver counts it.

    Time runs from the job's start to its end (or now); trials are trial rows, since
    MODEL_TRIAL_COUNT bounds the rows of each sub-job. A limit is null when the budget has no such key.
    """
    time_hours = job.budget.get("TIME_HOURS")
    per_model = job.budget.get("MODEL_TRIAL_COUNT")
    started, finished = job.started_at, job.finished_at
    return {
        "time_s": 0.0 if started is None else max(0.0, ((finished or now) - started).total_seconds()),
        "time_limit_s": None if time_hours is None else float(time_hours) * 3600,
        "trials": trials,
        "trial_limit": None if per_model is None else int(per_model) * sub_jobs,
    }


def _counts(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = {state.value: 0 for state in TrialState}
    for part in parts:
        for state, n in part.items():
            total[state] += n
    return total
