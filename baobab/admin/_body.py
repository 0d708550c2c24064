"""Reading request bodies (JSON objects, multipart uploads): every bad field is a 400 that names it.

A JSON body is held to limits before anything reads it further, since a body the
parser or the database chokes on would otherwise be a 500, or stored and echoed by
every listing: at most ``BAOBAB_MAX_JSON_KB`` (413), nested at most
:data:`MAX_JSON_DEPTH` deep (checked on the raw text, before parsing, which would
recurse once per level), integers of at most :data:`MAX_INT_DIGITS` digits, and only
finite numbers (``NaN`` and ``Infinity`` are not JSON; a stored one is echoed as
invalid JSON).
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Collection
from typing import Any, TypeVar

import numpy as np
from flask import request
from werkzeug.datastructures import FileStorage
from werkzeug.exceptions import RequestEntityTooLarge

from baobab._text import clean_text
from baobab.admin._state import admin_state
from baobab.exceptions import RequestError

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "MAX_NAME_LENGTH",
    "check_fields",
    "enum_field",
    "json_object",
    "json_type",
    "multipart_upload",
    "name_field",
    "number_field",
    "read_capped",
    "string_field",
]

E = TypeVar("E", bound=enum.Enum)

#: The longest name a user may give (the name columns hold 255 characters).
MAX_NAME_LENGTH = 255
#: How deep arrays and objects may nest in a JSON body.
MAX_JSON_DEPTH = 64
#: The most digits an integer in a JSON body may have (an id has 19).
MAX_INT_DIGITS = 100
# A JSON string, escapes included: what the depth count skips.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPENERS = np.frombuffer(b"[{", dtype=np.uint8)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_object(*, fields: Collection[str]) -> dict[str, Any]:
    """The body as a JSON object whose keys are all among ``fields``.

    Raises:
        RequestEntityTooLarge: the body is over ``BAOBAB_MAX_JSON_KB`` (a JSON 413).
        RequestError: the body is not a JSON object sent as ``application/json``, breaks
            a limit of the module docstring, or holds an unknown field (a typo would
            otherwise be ignored silently).
    """
    body = _json_body()
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object, got {json_type(body)}")
    check_fields(body, fields)
    return body


def check_fields(value: dict[str, Any], fields: Collection[str], *, at: str = "") -> None:
    """Refuse a key of ``value`` not among ``fields`` (a typo would otherwise be ignored silently).

    Args:
        at: where ``value`` is in the body (``versions[0]``), for a nested object; the body itself when empty.

    Raises:
        RequestError: naming the first unknown field.
    """
    for name in value:
        if name not in fields:
            where, path = (f"{at}: ", f"{at}.{name}") if at else ("", name)
            raise RequestError(f"{where}unknown field {name!r}; known fields: {', '.join(fields)}", field=path)


def _json_body() -> Any:
    """The body's JSON value, within the limits of the module docstring."""
    if not request.is_json:
        raise RequestError("the request body must be a JSON object, sent with 'Content-Type: application/json'")
    limit_kb = admin_state().settings.max_json_kb
    data = read_capped(
        limit_kb * 1024, f"the JSON body is larger than the server's limit of {limit_kb} KiB (BAOBAB_MAX_JSON_KB)"
    )
    if not data.strip():
        raise RequestError("the request body must be a JSON object, got an empty body")
    _check_depth(data)
    try:
        value = json.loads(data, parse_int=_parse_int, parse_constant=float)
    except RequestError:
        raise
    except ValueError as e:  # UnicodeDecodeError too
        raise RequestError(f"the request body is not valid JSON: {e}") from None
    _check_finite(value, "")
    return value


def read_capped(limit: int, too_large: str) -> bytes:
    """The raw body, if it is at most ``limit`` bytes: never more than ``limit + 1`` of it is read.

    A ``Content-Length`` over the limit is refused before anything is read; a body without
    one (chunked) is read up to one byte past the limit.

    Raises:
        RequestEntityTooLarge: the body is over ``limit`` (a JSON 413 saying ``too_large``).
    """
    length = request.content_length
    data = request.stream.read(limit + 1) if length is None or length <= limit else b""
    if (length or len(data)) > limit:
        raise RequestEntityTooLarge(too_large)
    return data


def _check_depth(data: bytes) -> None:
    brackets = np.frombuffer(_JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS), np.uint8)
    if brackets.size and int(np.cumsum(np.where(np.isin(brackets, _OPENERS), 1, -1)).max()) > MAX_JSON_DEPTH:
        raise RequestError(f"the JSON body nests arrays or objects more than {MAX_JSON_DEPTH} deep, the limit")


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise RequestError(f"the JSON body holds an integer of {digits} digits; at most {MAX_INT_DIGITS} are allowed")
    return int(text)


def _check_finite(value: Any, path: str) -> None:
    """Refuses NaN and infinities (``NaN``, ``Infinity``, or a number like ``1e999`` too large for a float)."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        where = f"{path!r} is" if path else "the body is"
        raise RequestError(f"{where} {shown}, which JSON cannot hold: numbers must be finite", field=path or None)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{path}[{i}]")


def multipart_upload(*, fields: Collection[str], what: str) -> tuple[dict[str, str], FileStorage | None]:
    """The form fields of a multipart upload (all among ``fields``) and its ``file`` part, or None.

    Args:
        fields: the known text fields.
        what: the thing uploaded, for the messages ("the dataset").

    Raises:
        RequestEntityTooLarge: the upload is over ``BAOBAB_MAX_UPLOAD_MB`` (a JSON 413).
        RequestError: not multipart or a body without parts, an unknown field, the file
            sent as a text field, or more than one ``file`` part.
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
    if not form and not files:  # werkzeug reads a broken body as one without parts
        problem = (
            "its Content-Type names no boundary"
            if "boundary" not in request.mimetype_params
            else "no part could be read: each must start with the boundary of the Content-Type"
        )
        raise RequestError(f"the body is not valid multipart/form-data ({problem}); send {what} as 'file'")
    for name in form:
        if name == "file":
            raise RequestError("'file' came as a text field; send it as a file part (with a filename)", field="file")
        if name not in fields:
            raise RequestError(f"unknown field {name!r}; known fields: {', '.join(fields)}, file", field=name)
    for name in files:
        if name != "file":
            raise RequestError(f"unknown file field {name!r}; send {what} as 'file'", field=name)
    uploads = files.getlist("file")
    if len(uploads) > 1:
        raise RequestError(f"{len(uploads)} 'file' parts; send {what} as one 'file' part", field="file")
    return form.to_dict(), uploads[0] if uploads else None


def string_field(body: dict[str, Any], name: str) -> str:
    """The required, non-blank string ``body[name]``.

    Raises:
        RequestError: the field is missing, not a string, blank, or not encodable as UTF-8.
    """
    value = body.get(name)
    if value is None:
        raise RequestError(f"{name!r} is required", field=name)
    if not isinstance(value, str):
        raise RequestError(f"{name!r} must be a string, got {json_type(value)}", field=name)
    if not value.strip():
        raise RequestError(f"{name!r} must not be blank", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # JSON can carry lone surrogates
        raise RequestError(f"{name!r} is not valid Unicode text", field=name) from None
    return value


def name_field(body: dict[str, Any], name: str, *, max_length: int = MAX_NAME_LENGTH) -> str:
    """The name a user gives something (an app, a dataset, a model): the one rule for all of them.

    A name is shown in pages and lists and travels in URLs and file names, so it follows
    :func:`baobab._text.clean_text` (no control or format characters, NFC-normalised: the
    value returned), may not be ``.`` or ``..`` (which a browser or an HTTP client resolves
    away in a URL), and has at most ``max_length`` characters.

    Raises:
        RequestError: naming the field and what is wrong.
    """
    try:
        value = clean_text(string_field(body, name), repr(name))
    except ValueError as e:
        raise RequestError(str(e), field=name) from None
    if len(value) > max_length:
        raise RequestError(f"{name!r} has {len(value)} characters, at most {max_length} are allowed", field=name)
    if value in (".", ".."):
        raise RequestError(f"{name!r} may not be {value!r}: URLs cannot name it", field=name)
    return value


def number_field(
    body: dict[str, Any], name: str, *, low: float, high: float, default: float, at: str = "", hint: str = ""
) -> float:
    """The number ``body[name]`` in ``[low, high]``, or ``default`` when it is absent or null.

    Args:
        at: where ``body`` is in the request body (``versions[0]``), for a nested object.
        hint: said after a range error (why the range is what it is).

    Raises:
        RequestError: the field is not a number (true and false are not numbers) or out of range.
    """
    path = f"{at}.{name}" if at else name
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"{path!r} must be a number, got {value!r}", field=path)
    if not low <= value <= high:
        raise RequestError(f"{path!r} is {value}; it must be between {low:.15g} and {high:.15g}{hint}", field=path)
    return float(value)


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


def json_type(value: Any) -> str:
    """How a message names the JSON type of ``value`` ("a number", "an array")."""
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)
