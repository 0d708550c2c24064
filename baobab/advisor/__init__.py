"""Search strategies behind one propose/observe interface, train-job budgets, and the job driver.

``JobDriver`` is imported on first use: it needs SQLAlchemy, which a trial process
importing the strategy names would load for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baobab.advisor._base import Strategy, TrialRecord, TrialStatus
from baobab.advisor._bayes import BayesStrategy
from baobab.advisor._budget import Budget, BudgetKey, parse_budget
from baobab.advisor._executor import Executor
from baobab.advisor._factory import STRATEGIES, choose_strategy, make_strategy
from baobab.advisor._random import RandomStrategy
from baobab.advisor._space import Dimension, DimensionKind, FlatPoint, SearchSpace
from baobab.advisor._tpe import TpeStrategy
from baobab.advisor._trial_knobs import base_knobs, trial_knobs, trial_policies

if TYPE_CHECKING:
    from baobab.advisor._driver import JobDriver

__all__ = [
    "STRATEGIES",
    "BayesStrategy",
    "Budget",
    "BudgetKey",
    "Dimension",
    "DimensionKind",
    "Executor",
    "FlatPoint",
    "JobDriver",
    "RandomStrategy",
    "SearchSpace",
    "Strategy",
    "TpeStrategy",
    "TrialRecord",
    "TrialStatus",
    "base_knobs",
    "choose_strategy",
    "make_strategy",
    "parse_budget",
    "trial_knobs",
    "trial_policies",
]


def __getattr__(name: str) -> Any:
    if name == "JobDriver":
        from baobab.advisor._driver import JobDriver

        return JobDriver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
