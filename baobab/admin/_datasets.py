"""``/api/v1/datasets``: developers and admins upload, list, read and delete datasets.

An upload is streamed into the artifact store under ``datasets/<uuid>/data.zip``
(IMAGE_FILES) or ``datasets/<uuid>/data.csv`` (TABULAR): the client's file name is
never used as a key, so it cannot break the key rules or clash. The stored file is
then decoded before any row is written, so a dataset that would fail a train job is
refused at upload, and a refused or failed upload leaves no artifact behind.

What "decoded" means per format:

- IMAGE_FILES: :func:`~baobab.store.read_image_files` reads the whole zip.
- TABULAR: with the optional form field ``target``, :func:`~baobab.store.read_tabular`
  reads the CSV with that target column, so every feature is checked to be numeric.
  Without it the target is unknown (it is a train argument), and guessing one could
  refuse a good file (a string label column read as a feature), so only the shape is
  checked: a readable CSV with a header and at least one data row.

Everyone sees and deletes only their own datasets; admins see and delete all. A dataset
someone else owns answers 404 like a missing one, so ids reveal nothing. A dataset a
train job uses cannot be deleted (409; the database's foreign key decides).
"""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from flask import Blueprint
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from baobab.admin._access import ALL_ROLES, may_see_private, private_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._body import MAX_NAME_LENGTH, enum_field, multipart_upload, name_field, string_field
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._state import admin_state
from baobab.exceptions import ConflictError, DatasetError, NotFoundError, RequestError
from baobab.model import DatasetFormat
from baobab.store import (
    ArtifactStore,
    Dataset,
    ZipLimits,
    read_image_files,
    read_tabular,
    session_scope,
)

__all__ = ["blueprint", "dataset_json"]

logger = logging.getLogger("baobab.admin")

blueprint = Blueprint("datasets", __name__, url_prefix="/api/v1/datasets")

_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["file", "name", "format"],
    "properties": {
        "file": {"type": "string", "contentMediaType": "application/octet-stream", "description": "a zip or a CSV"},
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
        "format": {"enum": [f.value for f in DatasetFormat]},
        "target": {"type": "string", "description": "TABULAR only: the target column, so every feature is checked"},
    },
}
_FORM_FIELDS = tuple(name for name in _UPLOAD_SCHEMA["properties"] if name != "file")
_DATASET_SCHEMA = register_schema(
    "Dataset",
    {
        "type": "object",
        "required": ["id", "name", "format", "size", "checksum", "owner_id", "created_at"],
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "format": {"enum": [f.value for f in DatasetFormat]},
            "size": {"type": "integer", "description": "bytes"},
            "checksum": {"type": "string", "description": "SHA-256, hex"},
            "owner_id": {"type": "integer"},
            "created_at": {"type": "string", "format": "date-time"},
        },
    },
)
_FILE_NAMES = {DatasetFormat.IMAGE_FILES: "data.zip", DatasetFormat.TABULAR: "data.csv"}
_CHUNK = 1 << 20
_CSV_CHUNK_ROWS = 100_000


def dataset_json(dataset: Dataset) -> dict[str, Any]:
    """A dataset as the API shows it (``checksum`` is the SHA-256 in hex), never where it is stored."""
    return {
        "id": dataset.id,
        "name": dataset.name,
        "format": dataset.format.value,
        "size": dataset.size_bytes,
        "checksum": dataset.checksum,
        "owner_id": dataset.owner_id,
        "created_at": dataset.created_at.isoformat(),
    }


@blueprint.post("")
@require_roles(*ALL_ROLES)
@api_doc(
    body=_UPLOAD_SCHEMA,
    body_type="multipart/form-data",
    responses={201: ("the new dataset", _DATASET_SCHEMA), 413: "the upload is over BAOBAB_MAX_UPLOAD_MB"},
)
def create_dataset() -> tuple[dict[str, Any], int]:
    """201 with the new dataset; 400 naming the field (``file`` for a dataset that does not decode)."""
    form, upload = multipart_upload(fields=_FORM_FIELDS, what="the dataset")
    name = name_field(form, "name")
    data_format = enum_field(form, "format", DatasetFormat)
    target = string_field(form, "target") if "target" in form else None
    if target is not None and data_format is not DatasetFormat.TABULAR:
        raise RequestError("'target' applies to TABULAR datasets only", field="target")
    if upload is None:
        raise RequestError("'file' is required: send the dataset as a multipart file field", field="file")

    store = admin_state().artifacts
    key = f"datasets/{uuid.uuid4().hex}/{_FILE_NAMES[data_format]}"
    size = 0

    def chunks() -> Iterator[bytes]:
        nonlocal size
        for chunk in iter(lambda: upload.read(_CHUNK), b""):
            size += len(chunk)
            yield chunk

    checksum = store.put_stream(key, chunks())
    try:
        _validate(store, key, data_format, target, shown_as=upload.filename or "file")
        dataset = Dataset(
            owner_id=current_user().id,
            name=name,
            format=data_format,
            artifact_path=key,
            size_bytes=size,
            checksum=checksum,
        )
        with session_scope(admin_state().engine) as session:
            session.add(dataset)
    except BaseException:
        store.delete(key)
        raise
    return dataset_json(dataset), 201


@blueprint.get("")
@require_roles(*ALL_ROLES)
@api_doc(
    responses={
        200: (
            "the datasets, newest first",
            {
                "type": "object",
                "required": ["datasets"],
                "properties": {"datasets": {"type": "array", "items": _DATASET_SCHEMA}},
            },
        )
    }
)
def list_datasets() -> dict[str, Any]:
    """``{"datasets": [...]}``, newest first: the caller's own, or all for an admin."""
    query = private_rows(
        select(Dataset).order_by(Dataset.created_at.desc(), Dataset.id.desc()), Dataset, current_user()
    )
    with session_scope(admin_state().engine) as session:
        datasets = session.scalars(query).all()
    return {"datasets": [dataset_json(dataset) for dataset in datasets]}


@blueprint.get("/<int:dataset_id>")
@require_roles(*ALL_ROLES)
@api_doc(responses={200: ("the dataset", _DATASET_SCHEMA), 404: "no such dataset that the caller may see"})
def get_dataset(dataset_id: int) -> dict[str, Any]:
    """One dataset; 404 when there is none with this id that the caller may see."""
    with session_scope(admin_state().engine) as session:
        return dataset_json(_get_visible(session, dataset_id))


@blueprint.delete("/<int:dataset_id>")
@require_roles(*ALL_ROLES)
@api_doc(responses={204: "deleted", 404: "no such dataset that the caller may see", 409: "a train job uses it"})
def delete_dataset(dataset_id: int) -> tuple[str, int]:
    """204; the row goes first, then the artifact, so a refused delete keeps both."""
    with session_scope(admin_state().engine) as session:
        dataset = _get_visible(session, dataset_id)
        key = dataset.artifact_path
        session.delete(dataset)
        try:
            session.flush()
        except IntegrityError:  # ON DELETE RESTRICT from train_jobs
            raise ConflictError(
                f"dataset {dataset_id} is used by a train job and cannot be deleted; delete the job first"
            ) from None
    admin_state().artifacts.delete(key)
    return "", 204


def _validate(store: ArtifactStore, key: str, data_format: DatasetFormat, target: str | None, *, shown_as: str) -> None:
    """Decodes the stored dataset; a :class:`DatasetError` becomes a 400 on ``file``.

    The reader names the server's file, which the client must not see: the message
    names the uploaded file instead.
    """
    with tempfile.TemporaryDirectory() as local_dir:  # used only by a remote store
        path = store.fetch_to(key, local_dir)
        try:
            if data_format is DatasetFormat.IMAGE_FILES:
                settings = admin_state().settings
                limits = ZipLimits(
                    member_bytes=settings.zip_member_mb * 2**20,
                    total_bytes=settings.zip_total_mb * 2**20,
                    max_ratio=settings.zip_max_ratio,
                )
                read_image_files(path, limits=limits)
            elif target is not None:
                read_tabular(path, target=target)
            else:
                _check_csv(path)
        except DatasetError as e:
            message = str(e).replace(os.path.abspath(e.file), shown_as) if e.file else str(e)
            raise RequestError(message, field="file") from None


def _check_csv(path: Path) -> None:
    """A readable CSV with a header and a data row (see the module docstring for why no more).

    Read in chunks, so that a large upload is parsed to its end without sitting in memory.
    """
    rows = 0
    try:
        with open(path, "rb") as f:
            for chunk in pd.read_csv(f, chunksize=_CSV_CHUNK_ROWS):
                rows += len(chunk)
    except pd.errors.EmptyDataError:
        raise DatasetError("the file is empty; a TABULAR dataset is a CSV with a header row", file=str(path)) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as e:
        raise DatasetError(f"not a readable CSV file: {e}", file=str(path)) from None
    if rows == 0:
        raise DatasetError("no data rows: the dataset is empty", file=str(path))


def _get_visible(session: Session, dataset_id: int) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or not may_see_private(current_user(), dataset):
        raise NotFoundError(f"no dataset with id {dataset_id}")
    return dataset
