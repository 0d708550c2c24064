"""Retention: which zoo models to keep when the zoo is over its storage budget.

A model's value is ``(1 + times chosen as a parent) × ½^(age / half-life)``: a model
that keeps being chosen earns its place, one nobody chose fades. Keeping the most
valuable set within the budget is a 0/1 knapsack; it is solved exactly on sizes
rounded up to ``budget / resolution`` bytes, so the set kept always fits the budget and
its value is optimal up to that rounding (exactly optimal when sizes are multiples of
the unit). A greedy by value per byte can keep far less value: one big valuable model
beats many small worthless ones only if it fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

__all__ = ["DEFAULT_HALF_LIFE_DAYS", "RetentionItem", "choose_kept", "model_value"]

DEFAULT_HALF_LIFE_DAYS = 30.0
_RESOLUTION = 2048


@dataclass(frozen=True)
class RetentionItem:
    id: int
    size_bytes: int
    created_at: datetime
    times_chosen: int


def model_value(times_chosen: int, age_days: float, half_life_days: float = DEFAULT_HALF_LIFE_DAYS) -> float:
    """What keeping a model is worth (see the module docstring)."""
    return (1.0 + max(0, times_chosen)) * 0.5 ** (max(0.0, age_days) / half_life_days)


def choose_kept(
    items: Sequence[RetentionItem],
    budget_bytes: int,
    now: datetime,
    *,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    resolution: int = _RESOLUTION,
) -> set[int]:
    """The ids of the most valuable set of ``items`` whose sizes add up to at most ``budget_bytes``."""
    if budget_bytes < 0:
        raise ValueError(f"budget_bytes must be at least 0, got {budget_bytes}")
    if sum(item.size_bytes for item in items) <= budget_bytes:
        return {item.id for item in items}
    unit = max(1, math.ceil(budget_bytes / resolution))
    capacity = budget_bytes // unit
    kept: set[int] = set()
    fitting: list[tuple[RetentionItem, int, float]] = []
    for item in items:
        if item.size_bytes <= 0:
            kept.add(item.id)
            continue
        weight = math.ceil(item.size_bytes / unit)
        if weight <= capacity:
            age_days = (now - item.created_at).total_seconds() / 86400
            fitting.append((item, weight, model_value(item.times_chosen, age_days, half_life_days)))
    best = np.zeros(capacity + 1)
    took = np.zeros((len(fitting), capacity + 1), dtype=bool)
    for k, (_, weight, value) in enumerate(fitting):
        with_it = best[:-weight] + value  # from the values before this item: each is taken once
        better = with_it > best[weight:]
        took[k, weight:] = better
        best[weight:] = np.where(better, with_it, best[weight:])
    room = int(np.argmax(best))
    for k in range(len(fitting) - 1, -1, -1):
        item, weight, _ = fitting[k]
        if took[k, room]:
            kept.add(item.id)
            room -= weight
    return kept
