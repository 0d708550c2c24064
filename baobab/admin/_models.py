"""``/api/v1/models``: model developers upload templates; everyone lists, reads and downloads what they may see.

An upload is a ``.py`` file in UTF-8 and the name of the class in it. Before anything is
stored, the template is loaded in a separate process under a time limit
(:func:`~baobab.admin._template_check.check_template_in_process`: import, the class
derives from ``BaseModel`` and implements it, ``get_knob_config()`` is valid). A
template that fails (a syntax or import error, a missing class, a bad knob config, an
import that never ends, a crash of the interpreter) is refused with 400 on ``file`` and
the reason, and leaves neither artifact nor row. A good one is stored under
``models/<uuid>/template.py`` (never under the client's file name) with its SHA-256 and
its knob config, read once here so that train jobs need not run user code to plan.

Who sees what: admins see every template; everyone else sees their own and the PUBLIC
ones; anything else answers 404 like a missing one. Deleting takes the owner or an
admin, so a PUBLIC template of someone else answers 403; one a train job uses answers
409 (the database's foreign key decides).
"""

from __future__ import annotations

import hashlib
import json
import keyword
import logging
import re
import tempfile
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from flask import Blueprint, Response, current_app, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.utils import secure_filename

from baobab._sandbox import protected_paths
from baobab.admin._access import ADMIN_ROLES, ALL_ROLES, may_change, may_see_shared, shared_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._body import MAX_NAME_LENGTH, enum_field, multipart_upload, name_field, string_field
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._state import admin_state
from baobab.admin._template_check import DEFAULT_CHECK_TIMEOUT_S, check_template_in_process
from baobab.exceptions import (
    ArtifactNotFoundError,
    ConflictError,
    KnobConfigError,
    NotFoundError,
    PermissionDeniedError,
    RequestError,
    TemplateError,
)
from baobab.model import Task, knob_config_from_json
from baobab.store import ModelAccess, ModelTemplate, UserRole, session_scope

__all__ = ["CHECK_TIMEOUT_CONFIG", "MAX_TEMPLATE_BYTES", "blueprint", "model_json"]

logger = logging.getLogger("baobab.admin")

blueprint = Blueprint("models", __name__, url_prefix="/api/v1/models")

#: ``app.config`` key: seconds the upload check may take to load a template (default 60).
CHECK_TIMEOUT_CONFIG = "BAOBAB_TEMPLATE_CHECK_TIMEOUT_S"
#: The largest template accepted: source code, not data (the server's upload limit applies first).
MAX_TEMPLATE_BYTES = 8 * 2**20

_UPLOAD_ROLES = (UserRole.MODEL_DEVELOPER, *ADMIN_ROLES)
_FORM_FIELDS = ("name", "task", "class_name", "dependencies", "access")
_LIST_PARAMETERS = ("task",)
_MAX_VERSION_LENGTH = 100
_ARTIFACT_NAME = "template.py"
# PEP 508 distribution names.
_PACKAGE_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)

_MODEL_SCHEMA = register_schema(
    "Model",
    {
        "type": "object",
        "required": [
            "id", "name", "task", "class_name", "access", "dependencies", "knob_config", "checksum", "owner_id",
            "created_at",
        ],
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string", "maxLength": MAX_NAME_LENGTH},
            "task": {"enum": [t.value for t in Task]},
            "class_name": {"type": "string"},
            "access": {"enum": [a.value for a in ModelAccess]},
            "dependencies": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "package name → version, as uploaded",
            },
            "knob_config": {
                "type": "object",
                "description": "knob name → knob, as baobab.model.knob_config_to_json writes it",
            },
            "checksum": {"type": "string", "description": "SHA-256 of the template file, hex"},
            "owner_id": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
        },
    },
)  # fmt: skip
_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["file", "name", "task", "class_name"],
    "properties": {
        "file": {
            "type": "string",
            "contentMediaType": "text/x-python",
            "description": f"the template: a .py file in UTF-8, at most {MAX_TEMPLATE_BYTES // 2**20} MiB",
        },
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
        "task": {"enum": [t.value for t in Task]},
        "class_name": {"type": "string", "description": "the class in the file that derives from BaseModel"},
        "dependencies": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": 'a JSON object of package name → version string, e.g. {"scikit-learn": "1.5.2"}; default {}',
        },
        "access": {"enum": [a.value for a in ModelAccess], "default": ModelAccess.PRIVATE.value},
    },
}


def model_json(model: ModelTemplate) -> dict[str, Any]:
    """A template as the API shows it, never where it is stored."""
    return {
        "id": model.id,
        "name": model.name,
        "task": model.task.value,
        "class_name": model.class_name,
        "access": model.access.value,
        "dependencies": model.dependencies,
        "knob_config": json.loads(model.knob_config),
        "checksum": model.checksum,
        "owner_id": model.owner_id,
        "created_at": model.created_at.isoformat(),
    }


@blueprint.post("")
@require_roles(*_UPLOAD_ROLES)
@api_doc(
    body=_UPLOAD_SCHEMA,
    body_type="multipart/form-data",
    responses={
        201: ("the new template", _MODEL_SCHEMA),
        400: "a field is bad; for a template that does not load, field is 'file' and the message says why",
        403: "the caller is not a MODEL_DEVELOPER or an admin",
        413: "the upload is larger than the server's limit or the template limit",
    },
)
def create_model() -> tuple[dict[str, Any], int]:
    """Upload a model template; 201 with it once it loads in a separate process.

    The template is imported and its knob config read in a process of its own, under a
    time limit; a template that fails is refused with 400 on ``file`` and its traceback,
    and nothing is stored.
    """
    form, upload = multipart_upload(fields=_FORM_FIELDS, what="the template")
    name = name_field(form, "name")
    task = enum_field(form, "task", Task)
    class_name = _class_name(form)
    dependencies = _dependencies(form)
    access = enum_field(form, "access", ModelAccess) if "access" in form else ModelAccess.PRIVATE
    source, shown_as = _template_source(upload)

    with tempfile.TemporaryDirectory(prefix="baobab-upload-") as folder:
        path = Path(folder) / _ARTIFACT_NAME
        path.write_bytes(source)
        timeout_s = float(current_app.config.get(CHECK_TIMEOUT_CONFIG, DEFAULT_CHECK_TIMEOUT_S))
        try:
            settings = admin_state().settings
            config = check_template_in_process(
                path,
                class_name,
                task,
                timeout_s=timeout_s,
                shown_as=shown_as,
                protected=protected_paths(settings.home, settings.database_url, settings.artifacts_url),
            )
            knob_config = json.dumps(config, allow_nan=False)
            knob_config_from_json(knob_config)  # what the process answered must decode, as jobs will decode it
        except TemplateError as e:
            raise RequestError(str(e), field="file") from None
        except (KnobConfigError, ValueError) as e:
            message = f"{shown_as}: the check answered a knob config that does not decode: {e}"
            raise RequestError(message, field="file") from None

    store = admin_state().artifacts
    key = f"models/{uuid.uuid4().hex}/{_ARTIFACT_NAME}"
    checksum = store.put_bytes(key, source)
    try:
        model = ModelTemplate(
            owner_id=current_user().id,
            name=name,
            task=task,
            class_name=class_name,
            artifact_path=key,
            checksum=checksum,
            dependencies=dependencies,
            access=access,
            knob_config=knob_config,
        )
        with session_scope(admin_state().engine) as session:
            session.add(model)
    except BaseException:
        store.delete(key)
        raise
    return model_json(model), 201


@blueprint.get("")
@require_roles(*ALL_ROLES)
@api_doc(
    query={"task": {"enum": [t.value for t in Task], "description": "only the templates for this task"}},
    responses={
        200: (
            "the templates the caller may see, by id",
            {
                "type": "object",
                "required": ["models"],
                "properties": {"models": {"type": "array", "items": _MODEL_SCHEMA}},
            },
        )
    },
)
def list_models() -> dict[str, Any]:
    """``{"models": [...]}`` by id: the caller's own and the PUBLIC ones, or all for an admin."""
    for parameter in request.args:
        if parameter not in _LIST_PARAMETERS:
            known = ", ".join(_LIST_PARAMETERS)
            raise RequestError(f"unknown query parameter {parameter!r}; known parameters: {known}", field=parameter)
    query = shared_rows(select(ModelTemplate).order_by(ModelTemplate.id), ModelTemplate, current_user())
    if "task" in request.args:
        query = query.where(ModelTemplate.task == enum_field(request.args.to_dict(), "task", Task))
    with session_scope(admin_state().engine) as session:
        models = session.scalars(query).all()
    return {"models": [model_json(model) for model in models]}


@blueprint.get("/<int:model_id>")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"model_id": "the template's id"},
    responses={200: ("the template", _MODEL_SCHEMA), 404: "no template with this id that the caller may see"},
)
def get_model(model_id: int) -> dict[str, Any]:
    """One template; 404 when there is none with this id that the caller may see."""
    with session_scope(admin_state().engine) as session:
        return model_json(_get_visible(session, model_id))


@blueprint.get("/<int:model_id>/file")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"model_id": "the template's id"},
    responses={
        200: ("the template file, as an attachment", {"type": "string"}, "text/x-python"),
        404: "no template with this id that the caller may see",
    },
)
def download_model(model_id: int) -> Response:
    """The template's ``.py`` file as uploaded (``text/x-python``, an attachment)."""
    with session_scope(admin_state().engine) as session:
        model = _get_visible(session, model_id)
    try:
        source = admin_state().artifacts.get_bytes(model.artifact_path)
    except ArtifactNotFoundError:
        # The row outlived its file: the server's fault, not the client's; logged with the key.
        raise RuntimeError(f"model {model.id}: its template {model.artifact_path!r} is missing") from None
    if hashlib.sha256(source).hexdigest() != model.checksum:
        raise RuntimeError(f"model {model.id}: the template {model.artifact_path!r} does not match its checksum")
    file_name = secure_filename(model.name) or f"model-{model.id}"
    if not file_name.endswith(".py"):
        file_name += ".py"
    response = Response(source, content_type="text/x-python; charset=utf-8")
    response.headers["Content-Disposition"] = f'attachment; filename="{file_name}"'
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.set_etag(model.checksum)
    return response


@blueprint.delete("/<int:model_id>")
@require_roles(*ALL_ROLES)
@api_doc(
    path={"model_id": "the template's id"},
    responses={
        204: "deleted, with its file",
        403: "the template is visible (PUBLIC) but the caller neither owns it nor is an admin",
        404: "no template with this id that the caller may see",
        409: "a train job uses the template",
    },
)
def delete_model(model_id: int) -> tuple[str, int]:
    """Delete a template (its owner or an admin); 204. The row goes first, then the file."""
    with session_scope(admin_state().engine) as session:
        model = _get_visible(session, model_id)
        if not may_change(current_user(), model):
            raise PermissionDeniedError(
                f"model {model_id} belongs to another user; only its owner or an admin may delete it"
            )
        key = model.artifact_path
        session.delete(model)
        try:
            session.flush()
        except IntegrityError:  # ON DELETE RESTRICT from sub_jobs
            raise ConflictError(
                f"model {model_id} is used by a train job and cannot be deleted; delete the job first"
            ) from None
    admin_state().artifacts.delete(key)
    return "", 204


def _class_name(form: dict[str, str]) -> str:
    class_name = string_field(form, "class_name")
    if not class_name.isidentifier() or keyword.iskeyword(class_name) or len(class_name) > MAX_NAME_LENGTH:
        raise RequestError(
            f"'class_name' is {class_name!r}; give the name of the template's class, a Python identifier such "
            "as 'MyModel'",
            field="class_name",
        )
    return class_name


def _dependencies(form: dict[str, str]) -> dict[str, str]:
    """The ``dependencies`` field: a JSON object of package name → version string; absent or blank is ``{}``."""
    text = form.get("dependencies", "")
    if not text.strip():
        return {}
    example = 'e.g. {"scikit-learn": "1.5.2"}'
    try:
        value = json.loads(text)
    except ValueError as e:
        message = f"'dependencies' is not valid JSON ({e}); send an object, {example}"
        raise RequestError(message, field="dependencies") from None
    if not isinstance(value, dict):
        raise RequestError(
            f"'dependencies' must be a JSON object of package name to version, {example}; got {type(value).__name__}",
            field="dependencies",
        )
    for package, version in value.items():
        if not _PACKAGE_NAME.fullmatch(package):
            raise RequestError(f"'dependencies': {package!r} is not a package name", field="dependencies")
        if not isinstance(version, str) or not version.strip():
            raise RequestError(
                f"'dependencies': the version of {package!r} must be a non-blank string such as \"1.5.2\", "
                f"got {json.dumps(version)}",
                field="dependencies",
            )
        if len(version) > _MAX_VERSION_LENGTH or not version.isprintable():
            raise RequestError(
                f"'dependencies': the version of {package!r} must be one line of at most {_MAX_VERSION_LENGTH} "
                "characters",
                field="dependencies",
            )
    return value


def _template_source(upload: Any) -> tuple[bytes, str]:
    """The uploaded file's bytes, and the name messages show it by (the client's, without folders).

    Raises:
        RequestError: no file, not a ``.py`` name, empty, or not UTF-8.
        RequestEntityTooLarge: over :data:`MAX_TEMPLATE_BYTES`.
    """
    if upload is None:
        raise RequestError("'file' is required: send the template as a multipart file field", field="file")
    shown_as = PurePosixPath((upload.filename or "").replace("\\", "/")).name
    if not shown_as.lower().endswith(".py"):
        raise RequestError(
            f"'file' must be a Python source file whose name ends in .py, got {shown_as or 'no file name'!r}",
            field="file",
        )
    source = upload.read(MAX_TEMPLATE_BYTES + 1)
    if len(source) > MAX_TEMPLATE_BYTES:
        raise RequestEntityTooLarge(
            f"{shown_as} is larger than {_size(MAX_TEMPLATE_BYTES)}, the limit for a model template; "
            "keep data out of the template (read it in train())"
        )
    if not source.strip():
        raise RequestError(f"{shown_as}: the file is empty; upload the template's source code", field="file")
    try:
        source.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(
            f"{shown_as}: not UTF-8 text (byte {e.start} is {source[e.start : e.start + 1]!r}); save it as UTF-8",
            field="file",
        ) from None
    return source, shown_as


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n % 2**20 == 0 else f"{n // 2**10} KiB" if n % 2**10 == 0 else f"{n} bytes"


def _get_visible(session: Session, model_id: int) -> ModelTemplate:
    model = session.get(ModelTemplate, model_id)
    if model is None or not may_see_shared(current_user(), model):
        raise NotFoundError(f"no model with id {model_id}")
    return model
