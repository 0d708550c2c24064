"""Reading the URL: ids in paths (:func:`check_path_ids`), query strings of whole numbers in range, and no
parameter a route does not know."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

from flask import request

from baobab.exceptions import NotFoundError, RequestError

__all__ = [
    "INCLUDE_ARG",
    "INCLUDE_STOPPED",
    "MAX_ID",
    "bool_query_arg",
    "check_path_ids",
    "check_query_args",
    "include_arg",
    "int_query_arg",
]

#: The query parameter that asks a listing for fields it leaves out by default.
INCLUDE_ARG = "include"
#: The query parameter (and body field) that lets trials STOPPED mid-training count as best trials.
INCLUDE_STOPPED = "include_stopped"

#: The largest id a row can have; a larger number in a URL or a body names nothing (and
#: would overflow SQLite's integers), so it answers like a missing row.
MAX_ID = 2**63 - 1

#: What a path id names, where its parameter's name does not say it (``dataset_id``: a dataset).
_PATH_NOUNS = {"job_id": "inference job"}


def check_path_ids(endpoint: str | None, values: dict[str, Any] | None) -> None:
    """Answers 404 for a number in the path above :data:`MAX_ID`, before any view runs.

    Registered for every route as a URL value preprocessor, so no id route can forget it
    and hand the database a number it cannot hold (an OverflowError, a 500). A number too
    long to convert at all (thousands of digits) matches no route, a 404 as well.

    Raises:
        NotFoundError: saying what the id would have named, as the view would for a missing row.
    """
    values = values or {}
    for name, value in values.items():
        if isinstance(value, int) and value > MAX_ID:
            if name == "app_version":
                raise NotFoundError(f"no train job {values.get('app')!r} version {value}")
            noun = _PATH_NOUNS.get(name, name.removesuffix("_id").replace("_", " "))
            raise NotFoundError(f"no {noun} with id {value}")


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


def bool_query_arg(name: str) -> bool:
    """The boolean query parameter ``name`` (``true`` or ``false``); False when absent.

    Raises:
        RequestError: any other value (the error names the parameter).
    """
    raw = request.args.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise RequestError(f"query parameter {name!r} must be true or false, got {raw!r}", field=name)
    return raw == "true"


def include_arg(heavy: Collection[str]) -> set[str]:
    """The ``heavy`` fields that ``?include=a,b`` asks a listing for (none by default).

    A listing leaves out fields that can be large (a job's ``train_args``), so that one
    row cannot make every listing heavy; the page of one row shows them.

    Raises:
        RequestError: naming a field that is not among ``heavy``.
    """
    raw = request.args.get(INCLUDE_ARG)
    asked = {part.strip() for part in raw.split(",") if part.strip()} if raw is not None else set()
    for name in sorted(asked):
        if name not in heavy:
            raise RequestError(
                f"query parameter {INCLUDE_ARG!r} names {name!r}; it takes {', '.join(heavy)}", field=INCLUDE_ARG
            )
    return asked


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
