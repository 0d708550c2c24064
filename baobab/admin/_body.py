"""Reading JSON request bodies: every bad field is a 400 that names it."""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any, TypeVar

from flask import request

from baobab.exceptions import RequestError

__all__ = ["enum_field", "json_object", "string_field"]

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
