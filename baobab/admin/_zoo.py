"""``/api/v1/zoo``: the model zoo: list and read its models, choose parents, record warm starts, register models.

Two families of routes:

- **for users** (a user's token): list and read zoo models and download their
  parameters, upload a model trained elsewhere, choose a parent for a posted graph
  (``POST /zoo/parent``, what ``baobab.zoo.warm_start`` does) and record that it was used;
- **for the worker of one trial** (the trial's token, as the ``/worker`` routes take):
  ``/zoo/trials/<id>/parent``, ``.../params/<zoo id>``, ``.../warm_start`` and
  ``.../model``: choose its parent, download the parent's parameters, record the warm
  start on its row, and add its trained model. A cluster worker holds no database
  credentials and no user's token; the trial's token opens these for that trial only.

Who sees what: a zoo model is visible to its owner and, when PUBLIC, to everyone;
admins see all of them in the listing. A parent, though, is chosen only among the
models the *owner of the new model* may see (their own and PUBLIC ones; for a trial,
its job's owner), even when an admin asks: weights carry the data they were trained
on (see :mod:`baobab.zoo._registry`). Anything not visible answers 404 like a missing one.

The parent choice runs here, next to the database, with a per-process cache of graph
features; a worker posts only its model's graph and downloads only the chosen
parent's parameters (``params_url``).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from flask import Blueprint, Response, request
from pydantic import Field, Strict, WithJsonSchema
from sqlalchemy import select
from sqlalchemy.orm import Session

from baobab.admin._access import ALL_ROLES, may_see_shared, shared_rows, shared_with
from baobab.admin._auth import check_trial_token, current_user, public, require_roles
from baobab.admin._body import enum_field, multipart_upload, name_field
from baobab.admin._downloads import send_artifact
from baobab.admin._openapi import api_doc, model_schema, register_schema
from baobab.admin._query import MAX_ID, check_query_args
from baobab.admin._request_body import RequestBody, read_body
from baobab.admin._state import admin_state
from baobab.admin._trials import find_trial
from baobab.exceptions import (
    NotFoundError,
    RequestError,
)
from baobab.model import Task
from baobab.store import (
    ModelAccess,
    ZooModel,
    session_scope,
)
from baobab.zoo import (
    FeatureCache,
    GraphFormatError,
    ModelGraph,
    ParentOffer,
    RegisteredModel,
    choose_parent,
    record_parent,
    register_trial,
    register_upload,
    trial_job,
)

__all__ = ["blueprint", "zoo_model_json"]

blueprint = Blueprint("zoo", __name__, url_prefix="/api/v1/zoo")


_UPLOAD_FIELDS = ("graph", "score", "task", "name", "access")
_MAX_PARAMS_BYTES = 4 * 2**30
# Features depend only on a graph's structure (keyed by fingerprint), so one cache serves every app in the process.
_FEATURES = FeatureCache()

_GRAPH_SCHEMA = {
    "type": "object",
    "description": "a model's architecture graph, as baobab.zoo.ModelGraph.to_json writes it",
}
_ZOO_MODEL_SCHEMA = register_schema(
    "ZooModel",
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "owner_id": {"type": "integer"},
            "access": {"enum": [a.value for a in ModelAccess]},
            "task": {"enum": [t.value for t in Task]},
            "trial_id": {"type": ["integer", "null"], "description": "the trial it was trained in, if any"},
            "dataset_id": {"type": ["integer", "null"]},
            "score": {"type": "number"},
            "fingerprint": {"type": "string", "description": "SHA-256 of the architecture's structure"},
            "io_signature": {"type": "string", "description": "input and output shapes, e.g. 1x28x28->10"},
            "traced": {"type": "boolean", "description": "false: torch.fx could not trace it; never a parent"},
            "node_count": {"type": "integer"},
            "param_count": {"type": "integer"},
            "size_bytes": {"type": "integer"},
            "times_chosen": {"type": "integer", "description": "warm starts it gave"},
            "last_chosen_at": {"type": ["string", "null"], "format": "date-time"},
            "created_at": {"type": "string", "format": "date-time"},
            "params_url": {"type": "string"},
            "graph": _GRAPH_SCHEMA,
        },
    },
)
_OFFER_SCHEMA = {
    "type": "object",
    "properties": {
        "zoo_model_id": {"type": ["integer", "null"], "description": "the parent; null: train from scratch"},
        "similarity": {"type": "number", "minimum": 0, "maximum": 1},
        "matched_share": {"type": "number", "description": "the share of the child's layers matched"},
        "mapping": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            "description": "[child node index, parent node index] pairs",
        },
        "parent_graph": {**_GRAPH_SCHEMA, "type": ["object", "null"]},
        "params_url": {"type": ["string", "null"], "description": "where to download the parent's parameters"},
        "reason": {"type": "string"},
        "candidates": {"type": "integer"},
        "seconds": {"type": "number", "description": "time taken to choose"},
    },
}


def zoo_model_json(model: RegisteredModel, *, graph: str | None = None) -> dict[str, Any]:
    """A zoo model as the API shows it; ``graph`` (its stored JSON text) adds the architecture."""
    data: dict[str, Any] = {
        "id": model.id,
        "name": model.name,
        "owner_id": model.owner_id,
        "access": model.access,
        "task": model.task,
        "trial_id": model.trial_id,
        "dataset_id": model.dataset_id,
        "score": model.score,
        "fingerprint": model.fingerprint,
        "io_signature": model.io_signature,
        "traced": model.traced,
        "node_count": model.node_count,
        "param_count": model.param_count,
        "size_bytes": model.size_bytes,
        "times_chosen": model.times_chosen,
        "last_chosen_at": None if model.last_chosen_at is None else model.last_chosen_at.isoformat(),
        "created_at": model.created_at.isoformat(),
        "params_url": _params_url(model.id),
    }
    if graph is not None:
        data["graph"] = json.loads(graph)
    return data


def _params_url(zoo_model_id: int) -> str:
    return f"{blueprint.url_prefix}/models/{zoo_model_id}/params"


def _budget() -> int:
    return admin_state().settings.zoo_budget_mb * 2**20


def _find(session: Session, zoo_model_id: int, *, owner_id: int | None = None) -> ZooModel:
    """The zoo model if visible (to ``owner_id``, else to the caller: admins see all).

    Raises:
        NotFoundError: there is none, or it is not visible (same message).
    """
    model = session.get(ZooModel, zoo_model_id) if 1 <= zoo_model_id <= MAX_ID else None
    if model is None or not (
        may_see_shared(current_user(), model) if owner_id is None else shared_with(owner_id, model)
    ):
        raise NotFoundError(f"no zoo model with id {zoo_model_id}")
    return model


#: What "'graph' is required" adds.
_GRAPH_HINT = {"graph": ": the model's graph (baobab.zoo.trace_graph)"}


def _graph(value: Any, field: str) -> ModelGraph:
    if value is None:
        raise RequestError(f"{field!r} is required{_GRAPH_HINT['graph']}", field=field)
    try:
        return ModelGraph.from_json(value, field=field) if not isinstance(value, str) else ModelGraph.loads(value)
    except GraphFormatError as e:
        raise RequestError(str(e), field=e.field) from None


#: A posted graph (``ModelGraph.to_json``), which :func:`_graph` reads (``ModelGraph`` names the part at fault).
_Graph = Annotated[Any, WithJsonSchema(_GRAPH_SCHEMA)]
_Similarity = Annotated[float, Field(ge=0, le=1, description="the graphs' similarity, as the parent's offer says")]


class _ParentQuery(RequestBody):
    required_hints = _GRAPH_HINT

    graph: _Graph
    task: Annotated[Task, Strict(False)]
    trial_id: int | None = Field(None, description="choose for this trial: among its job owner's models")


class _Chosen(RequestBody):
    similarity: _Similarity
    trial_id: int | None = Field(None, description="the trial warm-started from it")


class _TrialGraph(RequestBody):
    required_hints = _GRAPH_HINT

    graph: _Graph


class _TrialWarmStart(RequestBody):
    zoo_model_id: int
    similarity: _Similarity


def _number(body: dict[str, Any], name: str) -> float:
    value = body.get(name)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise RequestError(f"{name!r} must be a number, got {value!r}", field=name) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(f"{name!r} must be a finite number, got {value!r}", field=name)
    return float(value)


def _trial_owner(session: Session, trial_id: int) -> tuple[int, int]:
    """(trial id, its job's owner) for a trial the caller may see."""
    trial = find_trial(session, trial_id)
    return trial.id, trial.sub_job.train_job.owner_id


@blueprint.get("/models")
@require_roles(*ALL_ROLES)
@api_doc(
    query={"task": {"enum": [t.value for t in Task], "description": "only the zoo models of this task"}},
    responses={200: ("the zoo models the caller may see, newest first", {"type": "object"})},
)
def list_zoo_models() -> dict[str, Any]:
    """``{"zoo_models": [...]}``, newest first: the caller's and the PUBLIC ones, or all for an admin."""
    check_query_args(("task",))
    query = select(ZooModel).order_by(ZooModel.id.desc())
    if "task" in request.args:
        query = query.where(ZooModel.task == enum_field(request.args.to_dict(), "task", Task))
    query = shared_rows(query, ZooModel, current_user())
    with session_scope(admin_state().engine) as session:
        models = [RegisteredModel.of(row) for row in session.scalars(query)]
    return {"zoo_models": [zoo_model_json(model) for model in models]}


@blueprint.get("/models/<int:zoo_model_id>")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"zoo_model_id": "the zoo model's id"},
    responses={200: ("the zoo model with its graph", _ZOO_MODEL_SCHEMA), 404: "none the caller may see"},
)
def get_zoo_model(zoo_model_id: int) -> dict[str, Any]:
    """One zoo model, with its architecture ``graph``."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        row = _find(session, zoo_model_id)
        return zoo_model_json(RegisteredModel.of(row), graph=row.graph)


@blueprint.get("/models/<int:zoo_model_id>/params")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"zoo_model_id": "the zoo model's id"},
    responses={
        200: ("its parameters (safetensors), as an attachment", {"type": "string"}, "application/octet-stream"),
        404: "none the caller may see, or its parameters are gone",
    },
)
def download_zoo_params(zoo_model_id: int) -> Response:
    """The zoo model's parameters as TorchModel writes them (``module.<state name>`` tensors)."""
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        key = _find(session, zoo_model_id).params_path
    return _send_zoo_params(key, zoo_model_id)


def _send_zoo_params(key: str, zoo_model_id: int) -> Response:
    return send_artifact(
        key,
        lost=f"the parameters of zoo model {zoo_model_id} are missing from the artifact store",
        download_name=f"zoo-{zoo_model_id}.safetensors",
    )


@blueprint.post("/models")
@require_roles(*ALL_ROLES)
@api_doc(
    body={
        "type": "object",
        "required": ["file", "graph", "score", "task", "name"],
        "properties": {
            "file": {"type": "string", "contentMediaType": "application/octet-stream", "description": "safetensors"},
            "graph": {"type": "string", "contentMediaType": "application/json"},
            "score": {"type": "number", "description": "its validation score, higher is better"},
            "task": {"enum": [t.value for t in Task]},
            "name": {"type": "string"},
            "access": {"enum": [a.value for a in ModelAccess], "default": ModelAccess.PRIVATE.value},
        },
    },
    body_type="multipart/form-data",
    responses={201: ("the new zoo model", _ZOO_MODEL_SCHEMA), 400: "a field is bad (it is named)"},
)
def upload_zoo_model() -> tuple[dict[str, Any], int]:
    """Add a model trained outside a job: its parameters (``module.<name>`` tensors) and graph."""
    form, upload = multipart_upload(fields=_UPLOAD_FIELDS, what="the parameters")
    if upload is None:
        raise RequestError("'file' is required: the parameters as safetensors", field="file")
    graph = _graph(form.get("graph"), "graph")
    score = _number(form, "score")
    task = enum_field(form, "task", Task)
    name = name_field(form, "name")
    access = enum_field(form, "access", ModelAccess) if "access" in form else ModelAccess.PRIVATE
    data = upload.read(_MAX_PARAMS_BYTES + 1)
    if len(data) > _MAX_PARAMS_BYTES:
        raise RequestError(f"the parameters are over {_MAX_PARAMS_BYTES // 2**30} GiB", field="file")
    state = admin_state()
    model = register_upload(
        state.engine,
        state.artifacts,
        owner_id=current_user().id,
        graph=graph,
        params=data,
        score=score,
        task=task,
        name=name,
        access=access,
        budget_bytes=_budget(),
    )
    return zoo_model_json(model), 201


@blueprint.post("/parent")
@require_roles(*ALL_ROLES)
@api_doc(
    body=model_schema(_ParentQuery),
    responses={200: ("the parent, or zoo_model_id null and the reason", _OFFER_SCHEMA)},
)
def choose_zoo_parent() -> dict[str, Any]:
    """Choose the parent for a posted graph: the most accurate model of the most similar bucket.

    Nothing is recorded; after loading the weights, ``POST /zoo/models/<id>/chosen`` says so.
    """
    body = read_body(_ParentQuery)
    graph = _graph(body.graph, "graph")
    owner_id = current_user().id
    if body.trial_id is not None:
        with session_scope(admin_state().engine) as session:
            _, owner_id = _trial_owner(session, body.trial_id)
    selection = choose_parent(admin_state().engine, graph, task=body.task, owner_id=owner_id, cache=_FEATURES)
    offer = ParentOffer.of(selection).to_json()
    offer["params_url"] = None if selection.parent_id is None else _params_url(selection.parent_id)
    return offer


@blueprint.post("/models/<int:zoo_model_id>/chosen")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"zoo_model_id": "the parent"},
    body=model_schema(_Chosen),
    responses={204: "recorded", 404: "no zoo model (or trial) the model's owner may see"},
)
def record_zoo_parent(zoo_model_id: int) -> tuple[str, int]:
    """Record a warm start from this model: on the trial's row, and in the model's retention value."""
    body = read_body(_Chosen)
    trial_id = None
    with session_scope(admin_state().engine) as session:
        owner_id = None
        if body.trial_id is not None:
            trial_id, owner_id = _trial_owner(session, body.trial_id)
        _find(session, zoo_model_id, owner_id=owner_id if owner_id is not None else current_user().id)
    record_parent(admin_state().engine, zoo_model_id, body.similarity, trial_id=trial_id)
    return "", 204


# -- the worker of one trial (the trial's token) ----------------------------------------------


def _trial_params_url(trial_id: int, zoo_model_id: int) -> str:
    return f"{blueprint.url_prefix}/trials/{trial_id}/params/{zoo_model_id}"


@blueprint.post("/trials/<int:trial_id>/parent")
@public
@api_doc(
    summary="Choose the parent of a trial's model (trial token)",
    path={"trial_id": "the trial its worker is running"},
    body=model_schema(_TrialGraph),
    responses={200: ("the parent, or zoo_model_id null and the reason", _OFFER_SCHEMA)},
)
def choose_trial_parent(trial_id: int) -> dict[str, Any]:
    """The parent for the trial's model among its job owner's and the PUBLIC zoo models of the job's task."""
    check_trial_token(trial_id)
    graph = _graph(read_body(_TrialGraph).graph, "graph")
    state = admin_state()
    owner_id, task = trial_job(state.engine, trial_id)
    selection = choose_parent(state.engine, graph, task=task, owner_id=owner_id, cache=_FEATURES)
    offer = ParentOffer.of(selection).to_json()
    offer["params_url"] = None if selection.parent_id is None else _trial_params_url(trial_id, selection.parent_id)
    return offer


@blueprint.get("/trials/<int:trial_id>/params/<int:zoo_model_id>")
@public
@api_doc(
    summary="Download a parent's parameters for a trial (trial token)",
    path={"trial_id": "the trial its worker is running", "zoo_model_id": "a zoo model its job's owner may see"},
    responses={
        200: ("the parameters (safetensors)", {"type": "string"}, "application/octet-stream"),
        404: "no such zoo model that the trial's owner may see",
    },
)
def download_trial_parent_params(trial_id: int, zoo_model_id: int) -> Response:
    """The parameters of a zoo model the trial may start from."""
    check_trial_token(trial_id)
    owner_id, _ = trial_job(admin_state().engine, trial_id)
    with session_scope(admin_state().engine) as session:
        key = _find(session, zoo_model_id, owner_id=owner_id).params_path
    return _send_zoo_params(key, zoo_model_id)


@blueprint.post("/trials/<int:trial_id>/warm_start")
@public
@api_doc(
    summary="Record a trial's warm start (trial token)",
    path={"trial_id": "the trial its worker is running"},
    body=model_schema(_TrialWarmStart),
    responses={204: "recorded on the trial and in the parent's value", 404: "no such zoo model for this trial"},
)
def record_trial_warm_start(trial_id: int) -> tuple[str, int]:
    """The trial started from this zoo model: its row says so, and the parent's retention value grows."""
    check_trial_token(trial_id)
    body = read_body(_TrialWarmStart)
    state = admin_state()
    owner_id, _ = trial_job(state.engine, trial_id)
    with session_scope(state.engine) as session:
        _find(session, body.zoo_model_id, owner_id=owner_id)
    record_parent(state.engine, body.zoo_model_id, body.similarity, trial_id=trial_id)
    return "", 204


@blueprint.post("/trials/<int:trial_id>/model")
@public
@api_doc(
    summary="Add a finished trial's model to the zoo (trial token)",
    path={"trial_id": "the trial its worker ran"},
    body=model_schema(_TrialGraph),
    responses={
        201: ("its zoo model (the same one when it was added before)", _ZOO_MODEL_SCHEMA),
        409: "the trial has no trained model (not finished, no parameters, or SKIP_TRAIN)",
    },
)
def register_trial_model(trial_id: int) -> tuple[dict[str, Any], int]:
    """Score, parameters, task, dataset and owner are the trial's; only its graph is posted."""
    check_trial_token(trial_id)
    graph = _graph(read_body(_TrialGraph).graph, "graph")
    state = admin_state()
    model = register_trial(state.engine, state.artifacts, trial_id, graph, budget_bytes=_budget())
    return zoo_model_json(model), 201
