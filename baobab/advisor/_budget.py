"""A train job's budget: the keys a user may give, checked once at the boundary.

The job driver trusts a :class:`Budget`; only :func:`parse_budget` looks at what a user
sent (JSON from the API, options from the CLI), so every rule lives here.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baobab.exceptions import BudgetError

__all__ = ["BUDGET_SCHEMA", "MIN_TIME_HOURS", "Budget", "BudgetKey", "parse_budget"]


class BudgetKey(enum.StrEnum):
    GPU_COUNT = "GPU_COUNT"
    TIME_HOURS = "TIME_HOURS"
    MODEL_TRIAL_COUNT = "MODEL_TRIAL_COUNT"


@dataclass(frozen=True)
class Budget:
    """What a train job may spend.

    ``gpu_count`` is how many trials run at once on GPUs; 0 runs them on CPU slots.
    ``time_hours`` and ``model_trial_count`` (trials per model template) bound the job;
    at least one of them is set, and the job ends at whichever comes first.
    """

    gpu_count: int = 0
    time_hours: float | None = None
    model_trial_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {BudgetKey.GPU_COUNT: self.gpu_count}
        if self.time_hours is not None:
            data[BudgetKey.TIME_HOURS] = self.time_hours
        if self.model_trial_count is not None:
            data[BudgetKey.MODEL_TRIAL_COUNT] = self.model_trial_count
        return {str(k): v for k, v in data.items()}

    def workers(self, cpu_slots: int) -> int:
        """How many of the job's trials run at once (its cap): ``gpu_count``, or ``cpu_slots`` when that is 0.

        ``cpu_slots`` is the advisor's ``Settings.cpu_slots``."""
        return self.gpu_count or cpu_slots


#: Upper bounds that catch typos (a year of training, a million trials) rather than limit anyone.
_MAX_GPUS = 1024
_MAX_HOURS = 24 * 365
_MAX_TRIALS = 100_000
#: The shortest TIME_HOURS a user may ask for: one minute. A shorter budget (1e-300 hours) ends
#: before the driver can take the job up and start a trial, so the job could only end ERRORED.
MIN_TIME_HOURS = 1 / 60
#: A budget as JSON Schema (the API document shows it); :func:`parse_budget` reads its integers' bounds here.
BUDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "GPU_COUNT (0: CPU slots), TIME_HOURS and/or MODEL_TRIAL_COUNT (per template)",
    "properties": {
        BudgetKey.GPU_COUNT.value: {"type": "integer", "minimum": 0, "maximum": _MAX_GPUS, "default": 0},
        BudgetKey.TIME_HOURS.value: {"type": "number", "minimum": MIN_TIME_HOURS, "maximum": _MAX_HOURS},
        BudgetKey.MODEL_TRIAL_COUNT.value: {"type": "integer", "minimum": 1, "maximum": _MAX_TRIALS},
    },
    "additionalProperties": False,
    "anyOf": [{"required": [BudgetKey.TIME_HOURS.value]}, {"required": [BudgetKey.MODEL_TRIAL_COUNT.value]}],
}


def _integer(key: BudgetKey, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"must be an integer, got {value!r}", field=key)
    low, high = (BUDGET_SCHEMA["properties"][key.value][bound] for bound in ("minimum", "maximum"))
    if not low <= value <= high:
        raise BudgetError(f"must be between {low} and {high}, got {value}", field=key)
    return value


def parse_budget(data: object, *, stored: bool = False) -> Budget:
    """Check a budget as a user sent it, e.g. ``{"TIME_HOURS": 0.5, "GPU_COUNT": 0}``.

    Args:
        stored: ``data`` is a job's budget read back from the store, checked when it was
            written: TIME_HOURS is not held to :data:`MIN_TIME_HOURS`, so that a job stored
            before that floor was set (or a test's short job) still runs.

    Raises:
        BudgetError: naming the key (``field``) and the rule it breaks.
    """
    if not isinstance(data, Mapping):
        raise BudgetError(f"a budget must be an object of key to number, got {type(data).__name__}", field="budget")
    known = ", ".join(BudgetKey)
    for key in data:
        if key not in BudgetKey.__members__:
            raise BudgetError(f"unknown budget key {key!r}; known keys: {known}", field=str(key))
    if not data:
        raise BudgetError(f"the budget is empty; give TIME_HOURS or MODEL_TRIAL_COUNT (keys: {known})", field="budget")
    if BudgetKey.TIME_HOURS not in data and BudgetKey.MODEL_TRIAL_COUNT not in data:
        raise BudgetError("give TIME_HOURS or MODEL_TRIAL_COUNT (or both) so the job can end", field="budget")
    time_hours = data.get(BudgetKey.TIME_HOURS)
    if time_hours is not None:
        if isinstance(time_hours, bool) or not isinstance(time_hours, (int, float)) or not math.isfinite(time_hours):
            raise BudgetError(f"must be a number of hours, got {time_hours!r}", field=BudgetKey.TIME_HOURS)
        if not 0 < time_hours <= _MAX_HOURS:
            raise BudgetError(f"must be above 0 and at most {_MAX_HOURS}, got {time_hours}", field=BudgetKey.TIME_HOURS)
        if time_hours < MIN_TIME_HOURS and not stored:
            raise BudgetError(
                f"must be at least one minute ({MIN_TIME_HOURS:.6g} hours) for a trial to run, got {time_hours}",
                field=BudgetKey.TIME_HOURS,
            )
        time_hours = float(time_hours)
    trials = data.get(BudgetKey.MODEL_TRIAL_COUNT)
    return Budget(
        gpu_count=_integer(BudgetKey.GPU_COUNT, data.get(BudgetKey.GPU_COUNT, 0)),
        time_hours=time_hours,
        model_trial_count=None if trials is None else _integer(BudgetKey.MODEL_TRIAL_COUNT, trials),
    )
