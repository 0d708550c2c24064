"""Ensembling: one answer per query from the answers of several members.

Pure functions, no IO. Members are always given best first (highest validation
score first), which is what breaks a tied vote.

- Classification (IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION): members that answer
  probability vectors (lists of numbers, index = class) are averaged into one vector;
  members that answer labels (strings, numbers) vote, and a tie goes to the label of
  the best member among those tied. When the answers mix both, or the vectors differ
  in length, each vector votes for its most probable class index.
- Regression (TABULAR_REGRESSION): the mean (element by element for vector answers).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Sequence
from typing import Any

from baobab.model import Task

__all__ = ["check_answer", "ensemble", "majority_vote", "mean_value", "mean_vector"]


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _is_vector(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(_is_number(v) for v in value)


def check_answer(task: Task, answer: Any) -> str | None:
    """Why ``answer`` cannot be ensembled for ``task``; None when it can.

    Classification takes a label (a string, number or boolean) or a non-empty vector of
    numbers; regression a number or a non-empty vector of numbers.
    """
    if _is_vector(answer):
        return None
    if task is Task.TABULAR_REGRESSION:
        return None if _is_number(answer) else f"{_short(answer)} is not a number (a regression answer)"
    if isinstance(answer, (str, bool)) or _is_number(answer):
        return None
    return f"{_short(answer)} is neither a class label nor a vector of class probabilities"


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The element-wise mean of vectors of one length (averaged class probabilities).

    Raises:
        ValueError: no vectors, or vectors of different lengths.
    """
    if not vectors:
        raise ValueError("mean_vector() needs at least one vector")
    length = len(vectors[0])
    if any(len(v) != length for v in vectors):
        raise ValueError(f"vectors of different lengths: {sorted({len(v) for v in vectors})}")
    count = len(vectors)
    return [math.fsum(column) / count for column in zip(*vectors, strict=True)]


def majority_vote(labels: Sequence[Any]) -> Any:
    """The most frequent label; a tie goes to the tied label that the best member answered.

    Args:
        labels: one label per member, best member first. Labels are compared as JSON
            values, so 1 and "1" differ, and so do 1 and true.

    Raises:
        ValueError: no labels.
    """
    if not labels:
        raise ValueError("majority_vote() needs at least one label")
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for rank, label in enumerate(labels):
        key = _key(label)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, rank)
    winner = max(counts, key=lambda key: (counts[key], -first[key]))
    return labels[first[winner]]


def mean_value(values: Sequence[Any]) -> float | list[float]:
    """The mean of numbers, or the element-wise mean of vectors of one length.

    Raises:
        ValueError: no values, a mix of numbers and vectors, or vectors of different lengths.
    """
    if not values:
        raise ValueError("mean_value() needs at least one value")
    if all(_is_number(v) for v in values):
        return math.fsum(values) / len(values)
    if all(_is_vector(v) for v in values):
        return mean_vector(values)
    raise ValueError("mean_value() takes numbers or vectors of numbers, not a mix")


def ensemble(task: Task, answers: Sequence[Sequence[Any]]) -> list[Any]:
    """One answer per query from every member's answers.

    Args:
        task: decides how answers combine (see the module docstring).
        answers: ``answers[m][q]`` is member ``m``'s answer to query ``q``; members best
            first, each answering every query (check each with :func:`check_answer`).

    Raises:
        ValueError: no members, members answering different numbers of queries, or
            regression answers that do not combine (numbers mixed with vectors).
    """
    if not answers:
        raise ValueError("ensemble() needs the answers of at least one member")
    count = len(answers[0])
    if any(len(a) != count for a in answers):
        raise ValueError(f"members answered different numbers of queries: {[len(a) for a in answers]}")
    combine = mean_value if task is Task.TABULAR_REGRESSION else _classify
    return [combine([member[q] for member in answers]) for q in range(count)]


def _classify(votes: Sequence[Any]) -> Any:
    if all(_is_vector(v) for v in votes) and len({len(v) for v in votes}) == 1:
        return mean_vector(votes)
    return majority_vote([_argmax(v) if _is_vector(v) else v for v in votes])


def _argmax(vector: Sequence[float]) -> int:
    return max(range(len(vector)), key=lambda i: (vector[i], -i))


def _key(label: Any) -> str:
    return json.dumps(label, sort_keys=True)


def _short(value: Any) -> str:
    text = json.dumps(value) if _jsonable(value) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
