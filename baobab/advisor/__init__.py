"""Search strategies behind one propose/observe interface, train-job budgets, and the job driver."""

from baobab.advisor._base import Strategy, TrialRecord, TrialStatus
from baobab.advisor._bayes import BayesStrategy
from baobab.advisor._budget import Budget, BudgetKey, parse_budget
from baobab.advisor._executor import Executor
from baobab.advisor._factory import STRATEGIES, choose_strategy, make_strategy
from baobab.advisor._random import RandomStrategy
from baobab.advisor._space import Dimension, DimensionKind, FlatPoint, SearchSpace
from baobab.advisor._tpe import TpeStrategy

__all__ = [
    "STRATEGIES",
    "BayesStrategy",
    "Budget",
    "BudgetKey",
    "Dimension",
    "DimensionKind",
    "Executor",
    "FlatPoint",
    "RandomStrategy",
    "SearchSpace",
    "Strategy",
    "TpeStrategy",
    "TrialRecord",
    "TrialStatus",
    "choose_strategy",
    "make_strategy",
    "parse_budget",
]
