"""Reading request bodies (JSON objects, multipart uploads): every bad field is a 400 that names it."""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any, TypeVar

from flask import request
from werkzeug.datastructures import FileStorage
from werkzeug.exceptions import RequestEntityTooLarge

from baobab.admin._state import admin_state
from baobab.exceptions import RequestError

__all__ = ["enum_field", "json_object", "multipart_upload", "string_field"]

E = TypeVar("E", bound=enum.Enum)


def json_object(*, fields: Collection[str]) -> dict[str, Any]:
    """The body as a JSON object whose keys are all among ``fields``.

    Raises:
        RequestError: the body is not a JSON object sent as ``application/json``, or
            holds an unknown field (a typo would otherwise be ignored silently).
    """
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object, sent with 'Content-Type: application/json'")
    for name in body:
        if name not in fields:
            raise RequestError(f"unknown field {name!r}; known fields: {', '.join(fields)}", field=name)
    return body


def multipart_upload(*, fields: Collection[str], what: str) -> tuple[dict[str, str], FileStorage | None]:
    """The form fields of a multipart upload (all among ``fields``) and its ``file`` part, or None.

    Args:
        fields: the known text fields.
        what: the thing uploaded, for the messages ("the dataset").

    Raises:
        RequestEntityTooLarge: the upload is over ``BAOBAB_MAX_UPLOAD_MB`` (a JSON 413).
        RequestError: not multipart, an unknown field, or the file sent as a text field.
    """
    try:
        form, files = request.form, request.files
    except RequestEntityTooLarge:
        limit = admin_state().settings.max_upload_mb
        raise RequestEntityTooLarge(
            f"the upload is larger than the server's limit of {limit} MiB (BAOBAB_MAX_UPLOAD_MB)"
        ) from None
    if not request.mimetype.startswith("multipart/form-data"):
        raise RequestError(f"send {what} as 'Content-Type: multipart/form-data' with fields {', '.join(fields)}, file")
    for name in form:
        if name == "file":
            raise RequestError("'file' came as a text field; send it as a file part (with a filename)", field="file")
        if name not in fields:
            raise RequestError(f"unknown field {name!r}; known fields: {', '.join(fields)}, file", field=name)
    for name in files:
        if name != "file":
            raise RequestError(f"unknown file field {name!r}; send {what} as 'file'", field=name)
    return form.to_dict(), files.get("file")


def string_field(body: dict[str, Any], name: str) -> str:
    """The required, non-blank string ``body[name]``.

    Raises:
        RequestError: the field is missing, not a string, blank, or not encodable as UTF-8.
    """
    value = body.get(name)
    if value is None:
        raise RequestError(f"{name!r} is required", field=name)
    if not isinstance(value, str):
        raise RequestError(f"{name!r} must be a string, got {_json_type(value)}", field=name)
    if not value.strip():
        raise RequestError(f"{name!r} must not be blank", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # JSON can carry lone surrogates
        raise RequestError(f"{name!r} is not valid Unicode text", field=name) from None
    return value


def enum_field(body: dict[str, Any], name: str, kind: type[E]) -> E:
    """The member of ``kind`` whose value is ``body[name]``.

    Raises:
        RequestError: the field is missing or not one of the values, which it lists.
    """
    value = string_field(body, name)
    try:
        return kind(value)
    except ValueError:
        valid = ", ".join(str(member.value) for member in kind)
        raise RequestError(f"{name!r} is {value!r}; expected one of {valid}", field=name) from None


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)
