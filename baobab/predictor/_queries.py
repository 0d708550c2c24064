"""Checking queries at the door: a bad query is the client's 400, never a member's error.

A query that a member cannot read would make it raise, and with it every other query
of the micro-batch it rode in. So each query is checked against the task's query
format (see :mod:`baobab.model._queries`) before it is batched:

- IMAGE_CLASSIFICATION: one image as nested lists of numbers in 0..255, ``H x W``
  (grayscale) or ``H x W x C``, rectangular; when the training images are known,
  exactly their size and mode.
- TABULAR_*: one row, either a list of numbers (the feature columns in the order of the
  training CSV, target left out) or an object ``{column: number}`` naming every
  feature column, which is turned into that list.

Pure code: the expected shape comes in a :class:`QueryFormat`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from baobab.exceptions import RequestError
from baobab.model import DatasetFormat, Task

__all__ = ["QueryFormat", "check_queries"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_MAX_LISTED = 8


@dataclass(frozen=True)
class QueryFormat:
    """What one query of a job looks like.

    Attributes:
        task: the train job's task.
        feature_names: the feature columns of the training CSV, in order (tabular);
            None when unknown, and then only list queries are taken.
        image_shape: ``(H, W)`` or ``(H, W, 3)`` of the training images; None when unknown.
    """

    task: Task
    feature_names: tuple[str, ...] | None = None
    image_shape: tuple[int, ...] | None = None


def check_queries(queries: Any, query_format: QueryFormat) -> list[Any]:
    """The queries, checked and normalised (tabular objects become lists).

    Raises:
        RequestError: ``queries`` is not a list (field ``queries``), or a query does
            not fit the format (field ``queries[i]``, the message says what was expected).
    """
    if not isinstance(queries, list):
        raise RequestError(
            f"'queries' must be a list of queries, got {_json_type(queries)}; send {{\"queries\": [...]}}",
            field="queries",
        )
    if query_format.task.dataset_format is DatasetFormat.IMAGE_FILES:
        return [_check_image(query, i, query_format.image_shape) for i, query in enumerate(queries)]
    return [_check_row(query, i, query_format.feature_names) for i, query in enumerate(queries)]


def _bad(index: int, message: str) -> RequestError:
    field = f"queries[{index}]"
    return RequestError(f"{field}: {message}", field=field)


def _check_row(query: Any, index: int, names: tuple[str, ...] | None) -> list[float | int]:
    expected = (
        f"a list of {len(names)} numbers (the columns {_listed(names)} in this order) or an object {{column: number}}"
        if names is not None
        else "a list of numbers, the feature columns of the training CSV in order"
    )
    if isinstance(query, dict):
        if names is None:
            raise _bad(index, f"the feature columns of this job are not known; send {expected}")
        unknown = [key for key in query if key not in names]
        if unknown:
            raise _bad(index, f"unknown column(s) {_listed(unknown)}; the feature columns are {_listed(names)}")
        missing = [name for name in names if name not in query]
        if missing:
            raise _bad(index, f"lacks column(s) {_listed(missing)}; every feature column needs a value")
        return [_number(query[name], index, f"column {name!r}") for name in names]
    if not isinstance(query, list):
        raise _bad(index, f"expected {expected}, got {_json_type(query)}")
    if names is not None and len(query) != len(names):
        raise _bad(index, f"has {len(query)} value(s); expected {expected}")
    if not query:
        raise _bad(index, f"is empty; expected {expected}")
    return [_number(value, index, f"value {j}") for j, value in enumerate(query)]


def _number(value: Any, index: int, what: str) -> float | int:
    if isinstance(value, bool):
        return int(value)  # a boolean feature column reads as 0 and 1
    if not isinstance(value, numbers.Real):
        raise _bad(index, f"{what} is {_json_type(value)}, not a number")
    if not (math.isfinite(value) and abs(value) <= _FLOAT32_MAX):
        raise _bad(index, f"{what} is {value!r}; features must be finite and fit a float32")
    return value


def _check_image(query: Any, index: int, shape: tuple[int, ...] | None) -> Any:
    expected = _describe(shape) if shape is not None else "an H x W (grayscale) or H x W x C array"
    if not isinstance(query, list):
        raise _bad(index, f"an image is nested lists of numbers in 0..255, {expected}; got {_json_type(query)}")
    try:
        array = np.asarray(query)
    except (ValueError, TypeError, OverflowError):  # ragged: rows of different lengths
        raise _bad(index, f"is not a rectangular array: its rows differ in length; expected {expected}") from None
    if array.dtype.kind not in "iuf":
        raise _bad(index, f"holds values that are not numbers; an image is numbers in 0..255, {expected}")
    if array.ndim not in (2, 3) or 0 in array.shape:
        raise _bad(index, f"is an array of shape {list(array.shape)}; expected {expected}")
    if shape is not None and array.shape != shape:
        raise _bad(index, f"is {_describe(array.shape)}; expected {expected}, the size of the training images")
    if array.size and not (array.min() >= 0 and array.max() <= 255):  # NaN fails too
        raise _bad(index, "holds values outside 0..255; pixel values are 0..255")
    return query


def _describe(shape: tuple[int, ...]) -> str:
    if len(shape) == 2:
        return f"{shape[0]} x {shape[1]} (H x W, grayscale)"
    if len(shape) == 3:
        return f"{shape[0]} x {shape[1]} x {shape[2]} (H x W x C)"
    return " x ".join(str(n) for n in shape)


def _listed(names: Any) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:_MAX_LISTED])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _MAX_LISTED else "")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)
