"""``/api/v1/inference_jobs``: serve the best trials of a train job behind an API key.

Creating a job picks its members (the best ``k`` trials as ``best_trials`` ranks them,
or the trials the caller names), writes the job STARTING with its members as its one
version, "v1" (``/<id>/versions`` changes them), commits, and only then publishes
INFERENCE_CREATED; the inference supervisor starts the predictor and
stores its URL. Stopping writes STOPPED first, then publishes INFERENCE_STOPPED. A stopped (or
errored) job can be deleted, and its request logs go with it (:mod:`baobab.admin._request_logs`).

The API key is made here (``secrets.token_urlsafe(32)``), shown once in the create
answer and kept only as its SHA-256 in hex: it is a random 256-bit key, not a password,
so a plain hash is as strong as a slow one and the predictor checks it cheaply.

Visibility follows the train jobs: everyone sees and stops their own inference jobs,
admins all; someone else's answers 404 like a missing one.

``POST /<id>/predict`` relays queries to the job's predictor from the API's own origin,
for the web UI's playground: a page cannot call the predictor on its other port (CORS),
and an uploaded image is turned here into the query the predictor reads.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, Annotated, Any

import numpy as np
import requests
from flask import Blueprint, Response, request
from PIL import Image, UnidentifiedImageError
from pydantic import Field, WithJsonSchema
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload
from werkzeug.datastructures import FileStorage
from werkzeug.exceptions import BadGateway, RequestEntityTooLarge
from werkzeug.formparser import FormDataParser

from baobab.admin._access import ADMIN_ROLES, private_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._body import read_capped
from baobab.admin._inference_lookups import (
    MEMBER_SCHEMA,
    VersionTrials,
    best_first,
    member_json,
    revision_versions,
    visible_inference_job,
)
from baobab.admin._openapi import api_doc, model_schema, register_schema
from baobab.admin._query import INCLUDE_STOPPED, check_query_args
from baobab.admin._request_body import RequestBody, Text, read_body
from baobab.admin._servable import MAX_MEMBERS, TRIAL_IDS_SCHEMA, check_servable, trial_id_list
from baobab.admin._state import admin_state
from baobab.admin._train_job_lookups import OWNER_DESCRIPTION, best_trials, find_train_job, trial_query
from baobab.exceptions import ConflictError, NotFoundError, PermissionDeniedError, RequestError
from baobab.model import Task
from baobab.store import (
    FIRST_VERSION,
    IMAGES_CSV,
    Event,
    EventKind,
    InferenceJob,
    InferenceJobStatus,
    SubJob,
    TrainJob,
    Trial,
    UserRole,
    add_inference_job,
    delete_finished_inference_job,
    delete_request_logs,
    mark_inference_job_stopped,
    session_scope,
)

__all__ = [
    "API_KEY_HEADER",
    "DEFAULT_K",
    "blueprint",
    "hash_api_key",
    "inference_job_json",
    "predictor_unreachable",
    "running_predictor_url",
]

DEFAULT_K = 2
_ROLES = (UserRole.APP_DEVELOPER, UserRole.MODEL_DEVELOPER, *ADMIN_ROLES)


class _CreateBody(RequestBody):
    """``POST /inference_jobs``: which train job to serve, and which of its trials."""

    app: Text = Field(description="the train job's app")
    app_version: Annotated[int, Field(ge=1)] | None = Field(None, description="default: the latest")
    owner_id: Annotated[int, Field(ge=1)] | None = Field(None, description=OWNER_DESCRIPTION)
    k: Annotated[int, Field(ge=1, le=MAX_MEMBERS)] | None = Field(
        None, description=f"serve the best k trials (default {DEFAULT_K})"
    )
    trial_ids: Annotated[Any, WithJsonSchema(TRIAL_IDS_SCHEMA)] = Field(
        None, description="serve these trials instead of the best k"
    )
    public: bool = Field(False, description="answer predictions without the API key")
    include_stopped: bool = Field(
        False, description="with k: also trials STOPPED mid-training (at the deadline, or by early stopping)"
    )
    request_log_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="the share of answered requests the predictor logs (0: none); see .../request_logs"
    )


_INFERENCE_JOB_SCHEMA = register_schema(
    "InferenceJob",
    {
        "type": "object",
        "required": [
            "id", "app", "app_version", "train_job_id", "status", "public", "predictor_url", "error", "owner_id",
            "created_at", "stopped_at", "members", "request_log_rate", "revision", "served_revision", "versions",
        ],
        "properties": {
            "id": {"type": "integer"},
            "app": {"type": "string"},
            "app_version": {"type": "integer"},
            "train_job_id": {"type": "integer"},
            "status": {"enum": [status.value for status in InferenceJobStatus]},
            "public": {"type": "boolean"},
            "request_log_rate": {"type": "number", "minimum": 0, "maximum": 1},
            "predictor_url": {"type": ["string", "null"]},
            "error": {"type": ["string", "null"]},
            "owner_id": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
            "stopped_at": {"type": ["string", "null"], "format": "date-time"},
            "members": {
                "type": "array",
                "description": "the trials of every version it wants served, best first",
                "items": MEMBER_SCHEMA,
            },
            "revision": {"type": "integer", "description": "the revision of its versions it wants served"},
            "served_revision": {
                "type": ["integer", "null"],
                "description": "the revision its predictor serves (null until it serves)",
            },
            "versions": {
                "type": "array",
                "description": "the versions of the wanted revision (details: GET /inference_jobs/{id}/versions)",
                "items": {
                    "type": "object",
                    "required": ["name", "weight", "trial_ids"],
                    "properties": {
                        "name": {"type": "string"},
                        "weight": {"type": "number"},
                        "trial_ids": {"type": "array", "items": {"type": "integer"}},
                    },
                },
            },
            "api_key": {"type": "string", "description": "in the answer to POST only: it is shown this once"},
        },
    },
)  # fmt: skip
#: The header that carries the inference job's API key to :func:`predict`.
API_KEY_HEADER = "X-Api-Key"
_MAX_IMAGES = 64
#: Seconds to connect to the predictor, and to wait for its answer (a cold member may load first).
_PREDICT_TIMEOUT_S = (5.0, 120.0)

blueprint = Blueprint("inference_jobs", __name__, url_prefix="/api/v1/inference_jobs")


def hash_api_key(api_key: str) -> str:
    """What is stored for ``api_key``: its SHA-256 in hex (see the module docstring for why not scrypt)."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def inference_job_json(job: InferenceJob, versions: list[VersionTrials]) -> dict[str, Any]:
    """An inference job as the API shows it (never the key or its hash); ``versions``: those of its wanted revision.

    ``members`` are the trials of all those versions, best first.
    """
    members = best_first({trial.id: trial for version in versions for trial in version.trials}.values())
    return {
        "id": job.id,
        "app": job.train_job.app,
        "app_version": job.train_job.app_version,
        "train_job_id": job.train_job_id,
        "status": job.status.value,
        "public": job.public,
        "predictor_url": job.predictor_url,
        "error": job.error,
        "owner_id": job.owner_id,
        "created_at": job.created_at.isoformat(),
        "stopped_at": job.stopped_at.isoformat() if job.stopped_at is not None else None,
        "members": [member_json(trial) for trial in members],
        "request_log_rate": job.request_log_rate,
        "revision": job.revision,
        "served_revision": job.served_revision,
        "versions": [{"name": v.name, "weight": v.weight, "trial_ids": [t.id for t in v.trials]} for v in versions],
    }


@blueprint.post("")
@require_roles(*_ROLES)
@api_doc(
    body=model_schema(_CreateBody),
    responses={
        201: ("the job, STARTING, with its api_key", _INFERENCE_JOB_SCHEMA),
        404: "no such train job that the caller may see",
        409: "the train job has nothing to serve yet",
    },
)
def create_inference_job() -> tuple[dict[str, Any], int]:
    """201 with the job and its ``api_key`` (shown this once); 409 when the train job has nothing to serve yet."""
    body = read_body(_CreateBody)
    if body.k is not None and body.trial_ids is not None:
        raise RequestError("give either 'k' (serve the best k trials) or 'trial_ids', not both", field="trial_ids")
    trial_ids = None
    if body.trial_ids is not None:
        trial_ids = trial_id_list(body.trial_ids, "trial_ids", hint="; or leave it out to serve the best 'k'")

    api_key = secrets.token_urlsafe(32)
    with session_scope(admin_state().engine) as session:
        train_job = find_train_job(session, body.app, body.app_version, owner_id=body.owner_id)
        shown_as = f"train job {train_job.app!r} version {train_job.app_version}"
        # With trial_ids too: "nothing trained yet" says more than "trial_ids[0] is RUNNING".
        # Trials named by id are asked for, STOPPED ones included (_servable_trials checks them).
        count = 1 if trial_ids is not None else body.k if body.k is not None else DEFAULT_K
        best = best_trials(session, train_job, count, include_stopped=body.include_stopped or trial_ids is not None)
        if not best:
            stopped = best_trials(session, train_job, 1, include_stopped=True)
            if stopped:
                raise ConflictError(
                    f"{shown_as} has no COMPLETED trial to serve, only trials STOPPED mid-training (at its "
                    f"deadline, or by early stopping); serve them with {INCLUDE_STOPPED}=true",
                    field=INCLUDE_STOPPED,
                )
            if train_job.status.is_finished():
                raise ConflictError(
                    f"{shown_as} is {train_job.status.value} and has no trained trial to serve (none ended "
                    "COMPLETED or STOPPED with parameters); see why in its trials, then train a new version"
                )
            raise ConflictError(
                f"{shown_as} has no trained trials yet (none COMPLETED or STOPPED with parameters); "
                f"wait until one finishes (GET /api/v1/train_jobs/{train_job.app}/{train_job.app_version}/trials)"
            )
        members = best if trial_ids is None else _servable_trials(session, train_job, trial_ids, shown_as)
        job = add_inference_job(
            session,
            owner_id=current_user().id,
            train_job_id=train_job.id,
            api_key_hash=hash_api_key(api_key),
            public=body.public,
            trial_ids=[trial.id for trial in members],
            request_log_rate=body.request_log_rate,
        )
        answer = inference_job_json(job, [VersionTrials(FIRST_VERSION, 1.0, best_first(members))])
    admin_state().events.publish(Event(EventKind.INFERENCE_CREATED, answer["id"]))
    return {**answer, "api_key": api_key}, 201


@blueprint.get("")
@require_roles(*_ROLES)
@api_doc(
    query={"app": {"type": "string", "description": "only the jobs serving this app name"}},
    responses={
        200: (
            "the inference jobs, newest first",
            {
                "type": "object",
                "required": ["inference_jobs"],
                "properties": {"inference_jobs": {"type": "array", "items": _INFERENCE_JOB_SCHEMA}},
            },
        )
    },
)
def list_inference_jobs() -> dict[str, Any]:
    """``{"inference_jobs": [...]}``, newest first: the caller's own (all for an admin), of one ``?app=`` if given."""
    query = private_rows(
        select(InferenceJob).order_by(InferenceJob.created_at.desc(), InferenceJob.id.desc()),
        InferenceJob,
        current_user(),
    )
    app = request.args.get("app")
    if app is not None:
        query = query.join(InferenceJob.train_job).where(TrainJob.app == app)
    with session_scope(admin_state().engine) as session:
        jobs = session.scalars(query.options(selectinload(InferenceJob.train_job))).all()
        return {"inference_jobs": _jobs_json(session, jobs)}


@blueprint.get("/<int:job_id>")
@require_roles(*_ROLES)
@api_doc(responses={200: ("the inference job", _INFERENCE_JOB_SCHEMA), 404: "no such job that the caller may see"})
def get_inference_job(job_id: int) -> dict[str, Any]:
    """One inference job; 404 when there is none with this id that the caller may see."""
    with session_scope(admin_state().engine) as session:
        return _jobs_json(session, [visible_inference_job(session, job_id)])[0]


@blueprint.post("/<int:job_id>/stop")
@require_roles(*_ROLES)
@api_doc(responses={200: ("the job as it is now", _INFERENCE_JOB_SCHEMA), 404: "no such job that the caller may see"})
def stop_inference_job(job_id: int) -> dict[str, Any]:
    """200 with the job STOPPED; a job already stopped (or errored) answers unchanged and announces nothing."""
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id)
        # Conditional, so that a job that ended meanwhile keeps its final state and is announced once.
        stopped = mark_inference_job_stopped(session, job_id, now=datetime.now(UTC))
        session.refresh(job)
        answer = _jobs_json(session, [job])[0]
    if stopped:
        admin_state().events.publish(Event(EventKind.INFERENCE_STOPPED, job_id))
    return answer


@blueprint.delete("/<int:job_id>")
@require_roles(*_ROLES)
@api_doc(
    responses={
        204: "deleted, with its request logs",
        404: "no such job that the caller may see",
        409: "the job is STARTING or RUNNING: stop it first",
    }
)
def delete_inference_job(job_id: int) -> tuple[str, int]:
    """204; a job still STARTING or RUNNING is refused (409): stop it first.

    The row goes first (with its members), then the request logs. A predictor that is
    stopping may write a last part after that; the inference supervisor deletes the
    logs again once the predictor is gone.
    """
    with session_scope(admin_state().engine) as session:
        status = visible_inference_job(session, job_id, change=True).status
        if not status.is_finished():
            raise ConflictError(
                f"inference job {job_id} is {status.value}; stop it first (POST {blueprint.url_prefix}/{job_id}/stop)"
            )
        if not delete_finished_inference_job(session, job_id):  # a request beside this one deleted it
            raise NotFoundError(f"no inference job with id {job_id}")
    delete_request_logs(admin_state().artifacts, job_id)
    return "", 204


@blueprint.post("/<int:job_id>/predict")
@require_roles(*_ROLES)
@api_doc(
    body={
        "type": "object",
        "required": ["queries"],
        "properties": {"queries": {"type": "array", "description": "as the predictor's POST /predict takes them"}},
    },
    responses={
        200: ("the predictor's answer", {"type": "object", "required": ["predictions"]}),
        400: "the body or a query is bad (field names it: queries[i], or file[i] for an image)",
        413: "a body, or the queries made of its images, over BAOBAB_MAX_PREDICT_MB (the predictor's limit too)",
        403: f"the job is not public and {API_KEY_HEADER} is missing or wrong (field api_key)",
        409: "the job is not RUNNING",
        502: "the predictor does not answer",
    },
)
def predict(job_id: int) -> Response:
    """Relay ``{"queries": [...]}`` to the job's predictor; its answer comes back as it is.

    The body is JSON as the predictor takes it, or, for an IMAGE_CLASSIFICATION job,
    ``multipart/form-data`` with one or more image ``file`` parts (any format Pillow
    reads), each converted to the size and mode of the training images. Both are held to
    ``BAOBAB_MAX_PREDICT_MB``: the request, and the JSON made of the images before it is
    relayed, since a small compressed image can make queries many times its size, which the
    predictor would refuse anyway. The job's API key goes in the ``X-Api-Key`` header unless
    the job is public; a missing or wrong key answers 403 on ``api_key`` (a 401 would read as
    "your session expired").
    """
    check_query_args(())
    with session_scope(admin_state().engine) as session:
        job = visible_inference_job(session, job_id)
        url = running_predictor_url(job, "answers predictions")
        task, train_key = job.train_job.task, job.train_job.train_dataset.artifact_path
    limit = admin_state().settings.max_predict_mb * 2**20
    if request.mimetype == "application/json":
        body = read_capped(limit, _over_the_predict_limit("the request body is", "send fewer queries"))
    elif request.mimetype == "multipart/form-data":
        body = _image_body(job_id, task, train_key, limit)
    else:
        raise RequestError(
            "send JSON {\"queries\": [...]} as application/json, or image files as multipart/form-data field 'file'"
        )
    headers = {"Content-Type": "application/json"}
    api_key = request.headers.get(API_KEY_HEADER, "").strip()
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        answer = requests.post(f"{url}/predict", data=body, headers=headers, timeout=_PREDICT_TIMEOUT_S)
    except requests.RequestException as e:
        raise predictor_unreachable(job_id, e) from None
    if answer.status_code == 401:
        # The predictor's own message names its Authorization header, which a caller of this relay does not send.
        raise PermissionDeniedError(
            f"wrong API key for inference job {job_id} (sent in the {API_KEY_HEADER} header)"
            if api_key
            else f"inference job {job_id} is not public: send its API key in the {API_KEY_HEADER} header "
            "(the key was shown once, when the inference job was created)",
            field="api_key",
        )
    return Response(answer.content, status=answer.status_code, mimetype="application/json")


def _over_the_predict_limit(what: str, advice: str) -> str:
    """The message of every 413 of the predict relay: ``what`` (ending in a verb) is over ``BAOBAB_MAX_PREDICT_MB``."""
    limit_mb = admin_state().settings.max_predict_mb
    return f"{what} larger than the limit of {limit_mb} MiB (BAOBAB_MAX_PREDICT_MB); {advice}"


def _image_body(job_id: int, task: Task, train_key: str, limit: int) -> bytes:
    """The JSON body of the uploaded ``file`` parts as queries of the training images' size and mode.

    The request is read as a JSON one is (:func:`read_capped`: a ``Content-Length`` over
    ``limit`` is refused before a byte is read, a chunked body read to one byte past it),
    then parsed in memory; and the body is built to ``limit`` bytes at most: each image's
    query is encoded as it is made, and the first that takes the body past the limit stops it.

    Raises:
        RequestEntityTooLarge: the request or the body built from it is over ``limit``.
        RequestError: a bad field, no image, too many, or a file Pillow cannot read.
    """
    data = read_capped(limit, _over_the_predict_limit("the request body is", "send fewer or smaller images"))
    parser = FormDataParser(stream_factory=_in_memory, max_form_parts=request.max_form_parts)
    _, form, files = parser.parse(io.BytesIO(data), request.mimetype, len(data), request.mimetype_params)
    for name in [*form, *files]:
        if name != "file":
            raise RequestError(f"unknown field {name!r}; send the images as 'file' parts", field=name)
    if task is not Task.IMAGE_CLASSIFICATION:
        raise RequestError(
            f"inference job {job_id} serves a {task.value} job, which takes JSON queries, not image files", field="file"
        )
    uploads: list[FileStorage] = files.getlist("file")
    if not uploads:
        raise RequestError("no image: send one or more 'file' parts", field="file")
    if len(uploads) > _MAX_IMAGES:
        raise RequestError(f"{len(uploads)} images; at most {_MAX_IMAGES} go in one request", field="file")
    mode, size = _training_image_format(train_key)
    head, tail = b'{"queries": [', b"]}"
    queries: list[bytes] = []
    length = len(head) + len(tail)
    for index, upload in enumerate(uploads):
        query = json.dumps(_image_query(upload, index, mode, size)).encode()
        length += len(query) + (2 if queries else 0)  # and its ", "
        if length > limit:
            raise RequestEntityTooLarge(
                _over_the_predict_limit(
                    f"the queries made of file[0] to file[{index}] ({size[0]}x{size[1]} {mode} each) are",
                    "send fewer images",
                )
            )
        queries.append(query)
    return head + b", ".join(queries) + tail


def _in_memory(*_: Any, **__: Any) -> IO[bytes]:
    """A part's buffer: the body is in memory already, so no part is spooled to a temporary file left to close."""
    return io.BytesIO()


def _image_query(upload: FileStorage, index: int, mode: str, size: tuple[int, int]) -> list[Any]:
    """The uploaded image ``file[index]`` as a query: converted to ``mode``, resized to ``size``."""
    try:
        with Image.open(upload.stream) as image:
            converted = image.convert(mode)
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as e:
        # Pillow's own message for an unknown format names the in-memory buffer, not the file.
        reason = "no image format Pillow knows" if isinstance(e, UnidentifiedImageError) else str(e)
        raise RequestError(
            f"file[{index}] ({upload.filename or 'unnamed'}) is not an image Pillow can read: {reason}",
            field=f"file[{index}]",
        ) from None
    if converted.size != size:
        converted = converted.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(converted, dtype=np.uint8).tolist()


def _training_image_format(key: str) -> tuple[str, tuple[int, int]]:
    """The mode (``L`` or ``RGB``) and ``(width, height)`` of the first image of a stored IMAGE_FILES dataset.

    The predictor checks image queries against the same first image, so a converted
    upload always fits.
    """
    with admin_state().artifacts.open(key) as f, zipfile.ZipFile(f) as zf:
        rows = csv.reader(io.StringIO(zf.read(IMAGES_CSV).decode("utf-8-sig")))
        header = [column.strip() for column in next(rows)]
        first = next(row for row in rows if row)
        with Image.open(io.BytesIO(zf.read(first[header.index("path")].strip()))) as image:
            return ("RGB" if image.mode in ("RGB", "P") else "L"), image.size


def _jobs_json(session: Session, jobs: Sequence[InferenceJob]) -> list[dict[str, Any]]:
    """``jobs`` as the API shows them, with their wanted versions."""
    versions = revision_versions(session, {(job.id, job.revision) for job in jobs})
    return [inference_job_json(job, versions.get((job.id, job.revision), [])) for job in jobs]


def running_predictor_url(job: InferenceJob, what: str) -> str:
    """The URL of ``job``'s predictor, for a route that says what the job does once it runs (``"answers
    predictions"``).

    Raises:
        ConflictError: the job is not RUNNING, so no predictor answers for it.
    """
    if job.status is not InferenceJobStatus.RUNNING or job.predictor_url is None:
        raise ConflictError(f"inference job {job.id} is {job.status.value}; it {what} once it is RUNNING")
    return job.predictor_url


def predictor_unreachable(job_id: int, e: requests.RequestException) -> BadGateway:
    """The 502 for a request to the predictor of inference job ``job_id`` that got no answer (``e``)."""
    return BadGateway(f"the predictor of inference job {job_id} does not answer ({type(e).__name__})")


def _servable_trials(session: Session, train_job: TrainJob, trial_ids: list[int], shown_as: str) -> list[Trial]:
    """The trials ``trial_ids`` names, each checked to be a trained trial of ``train_job``."""
    query = trial_query().join(Trial.sub_job).where(Trial.id.in_(trial_ids), SubJob.train_job_id == train_job.id)
    found = {trial.id: trial for trial in session.scalars(query).unique()}
    for index, trial_id in enumerate(trial_ids):
        field = f"trial_ids[{index}]"
        trial = found.get(trial_id)
        if trial is None:  # missing, or of another job: the same answer, so ids reveal nothing
            raise RequestError(f"{field}: {shown_as} has no trial with id {trial_id}", field=field)
        check_servable(trial, field)
    return [found[trial_id] for trial_id in trial_ids]
