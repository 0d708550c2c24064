"""Reading the URL: ids in paths (:class:`IdConverter`), query strings of whole numbers in range, and no
parameter a route does not know."""

from __future__ import annotations

import re
from collections.abc import Iterable

from flask import request
from werkzeug.exceptions import NotFound
from werkzeug.routing import IntegerConverter

from baobab.exceptions import RequestError

__all__ = ["MAX_ID", "IdConverter", "check_query_args", "int_query_arg"]

#: The largest id a row can have; a larger number in a URL or a body names nothing (and
#: would overflow SQLite's integers), so it answers like a missing row.
MAX_ID = 2**63 - 1


class IdConverter(IntegerConverter):
    """The app's ``<int:...>`` converter: a path number above :data:`MAX_ID` answers 404 before any view runs.

    Every id route gets the rule by being an ``<int:>`` route, so none can forget it and
    hand the database a number it cannot hold (an OverflowError, a 500).
    """

    def to_python(self, value: str) -> int:
        if len(value.lstrip("0")) > len(str(MAX_ID)) or int(value) > MAX_ID:
            raise NotFound(f"nothing has the id {value}: ids go up to {MAX_ID}")
        return int(super().to_python(value))


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
