"""Search strategies behind one propose/observe interface, train-job budgets, and the job driver.

``JobDriver`` is imported on first use: it needs SQLAlchemy, which a trial process
importing the strategy names would load for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baobab.advisor._asha import AshaRule
from baobab.advisor._base import Strategy, TrialRecord, TrialStatus
from baobab.advisor._bayes import BayesStrategy
from baobab.advisor._budget import BUDGET_SCHEMA, MIN_TIME_HOURS, Budget, BudgetKey, parse_budget
from baobab.advisor._enas import EnasStrategy
from baobab.advisor._enas_phases import (
    PHASE_POLICIES,
    PLANNER_OPTIONS,
    EnasPhase,
    EnasPlanner,
    EnasProgress,
    EnasStep,
    phase_policies,
)
from baobab.advisor._evolution import EvolutionStrategy
from baobab.advisor._executor import Executor
from baobab.advisor._factory import STRATEGIES, choose_strategy, make_strategy
from baobab.advisor._job_options import (
    AUTO_MAX_GROUP,
    JOB_OPTION_NAMES,
    MAX_GROUP,
    EarlyStopping,
    EnasOptions,
    FusionChoice,
    FusionMode,
    GpuShareChoice,
    JobOptions,
    JobOptionsError,
    MaxGroup,
    PolicyOptions,
    ShareFrom,
    StoppingRuleName,
    TrainJobOptions,
    parse_job_options,
)
from baobab.advisor._job_plan import check_job_plan
from baobab.advisor._median import MedianRule
from baobab.advisor._packing import packed_size
from baobab.advisor._random import RandomStrategy
from baobab.advisor._space import Dimension, DimensionKind, FlatPoint, SearchSpace
from baobab.advisor._stopping import DEFAULT_METRICS, Action, Decision, Finish, NoStopping, Report, StoppingRule
from baobab.advisor._stopping_factory import STOPPING_RULES, make_stopping_rule
from baobab.advisor._tpe import TpeStrategy
from baobab.advisor._trial_knobs import base_knobs, trial_knobs, trial_policies

if TYPE_CHECKING:
    from baobab.advisor.driver import JobDriver

__all__ = [
    "AUTO_MAX_GROUP",
    "BUDGET_SCHEMA",
    "DEFAULT_METRICS",
    "MAX_GROUP",
    "MIN_TIME_HOURS",
    "PHASE_POLICIES",
    "PLANNER_OPTIONS",
    "STOPPING_RULES",
    "JOB_OPTION_NAMES",
    "EarlyStopping",
    "EnasOptions",
    "FusionChoice",
    "FusionMode",
    "GpuShareChoice",
    "JobOptions",
    "JobOptionsError",
    "MaxGroup",
    "PolicyOptions",
    "ShareFrom",
    "StoppingRuleName",
    "TrainJobOptions",
    "parse_job_options",
    "STRATEGIES",
    "Action",
    "AshaRule",
    "BayesStrategy",
    "Budget",
    "BudgetKey",
    "Decision",
    "Dimension",
    "DimensionKind",
    "EnasPhase",
    "EnasPlanner",
    "EnasProgress",
    "EnasStep",
    "EnasStrategy",
    "EvolutionStrategy",
    "Executor",
    "Finish",
    "FlatPoint",
    "JobDriver",
    "MedianRule",
    "NoStopping",
    "RandomStrategy",
    "Report",
    "SearchSpace",
    "StoppingRule",
    "Strategy",
    "TpeStrategy",
    "TrialRecord",
    "TrialStatus",
    "base_knobs",
    "check_job_plan",
    "choose_strategy",
    "make_stopping_rule",
    "make_strategy",
    "packed_size",
    "parse_budget",
    "phase_policies",
    "trial_knobs",
    "trial_policies",
]


def __getattr__(name: str) -> Any:
    if name == "JobDriver":
        from baobab.advisor.driver import JobDriver

        return JobDriver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
