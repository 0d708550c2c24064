"""JSON request bodies declared once, as Pydantic models: the model parses the body and writes its schema.

A bound kept in a schema for the OpenAPI document and again in a hand-written check holds
only while someone keeps the two in step; a :class:`RequestBody` is both. Its errors are
worded as the rest of the API words a bad field (``'k' is 0; it must be between 1 and 20``,
``'public' must be true or false, got 'yes'``) by :func:`body_error`, with the field's path
in the error's ``field``; a rule a validator adds (a blank name, a weak password) raises
ValueError with its whole message, and a parser that names a part of its field
(``budget.TIME_HOURS``, ``model_ids[2]``) raises the RequestError itself (a ValueError too),
which is answered as it is. A field sent as ``null`` counts as left out, as everywhere in the API: an
optional one takes its default, a required one "is required".

A body first passes :func:`baobab.admin._body.json_object` (its size, depth, finite numbers
and known keys), so a model only ever sees a JSON object of its own fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator

from baobab.admin._body import json_object, json_type
from baobab.exceptions import RequestError

__all__ = ["RequestBody", "Text", "body_error", "read_body"]

B = TypeVar("B", bound="RequestBody")


class RequestBody(BaseModel):
    """What every body is held to: JSON types as sent (no ``"1"`` for 1, no ``true`` for 1), no unknown field."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
    #: What "is required" adds for a field left out, where its type alone does not say what to send.
    required_hints: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _nulls_left_out(cls, data: Any) -> Any:
        return {name: value for name, value in data.items() if value is not None} if isinstance(data, dict) else data


def _text(value: str, info: ValidationInfo) -> str:
    if not value.strip():
        raise ValueError(f"{info.field_name!r} must not be blank")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # JSON can carry lone surrogates
        raise ValueError(f"{info.field_name!r} is not valid Unicode text") from None
    return value


#: A string that is not blank and encodes as UTF-8 (what the database and every page can hold).
Text = Annotated[str, AfterValidator(_text)]


def read_body(model: type[B]) -> B:
    """The request's JSON body parsed as ``model``.

    Raises:
        RequestEntityTooLarge: the body is over ``BAOBAB_MAX_JSON_KB``.
        RequestError: the body breaks a limit of ``json_object`` or a rule of ``model``, naming the field.
    """
    body = json_object(fields=tuple(model.model_fields))
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise body_error(e, model) from None


def body_error(error: ValidationError, model: type[RequestBody]) -> RequestError:
    """The first of ``error``'s problems as a 400 that names the field, worded as the API words them."""
    first = error.errors(include_url=False)[0]
    loc, kind, given, ctx = first["loc"], first["type"], first.get("input"), first.get("ctx") or {}
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    name = repr(path)
    if kind == "value_error" and isinstance(ctx.get("error"), RequestError):
        return ctx["error"]
    if kind == "value_error":
        message = str(ctx.get("error", first["msg"]))
    elif kind == "missing":
        message = f"{name} is required{model.required_hints.get(path, '')}"
    elif kind == "bool_type":
        message = f"{name} must be true or false, got {given!r}"
    elif kind == "int_type":
        message = f"{name} must be an integer, got {given!r}"
    elif kind == "float_type":
        message = f"{name} must be a number, got {given!r}"
    elif kind == "string_type" or (kind == "enum" and not isinstance(given, str)):
        message = f"{name} must be a string, got {json_type(given)}"
    elif kind == "enum":
        expected = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        message = f"{name} is {given!r}; expected one of {', '.join(expected)}"
    elif kind in ("greater_than_equal", "less_than_equal"):
        message = f"{name} is {given}; it must be {_range(_field_schema(model, loc))}"
    elif kind == "list_type":
        message = f"{name} must be an array, got {json_type(given)}"
    elif kind in ("too_short", "too_long"):
        if kind == "too_short":
            rule = f"it needs at least {ctx['min_length']}"
        else:
            rule = f"at most {ctx['max_length']} are allowed"
        message = f"{name} has {ctx['actual_length']} items; {rule}"
    else:
        message = f"{name}: {first['msg']}"
    return RequestError(message, field=path or None)


def _range(schema: dict[str, Any]) -> str:
    low, high = (_number(schema.get(bound)) for bound in ("minimum", "maximum"))
    if low and high:
        return f"between {low} and {high}"
    return f"at least {low}" if low else f"at most {high}"


def _number(value: float | None) -> str:
    return "" if value is None else str(value) if isinstance(value, int) else f"{value:.15g}"


def _field_schema(model: type[BaseModel], loc: Sequence[int | str]) -> dict[str, Any]:
    """The JSON schema of the body's field ``loc[0]`` (the non-null branch of an optional one).

    Bodies are flat: a bound sits on a field of the body itself, and a field that holds structure of its own
    (a graph, a budget) is read by its own parser, which names the part at fault.
    """
    here = model.model_json_schema().get("properties", {}).get(loc[0], {}) if loc else {}
    branches = [branch for branch in here.get("anyOf", ()) if branch.get("type") != "null"]
    return branches[0] if branches else here
