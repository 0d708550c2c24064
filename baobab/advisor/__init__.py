"""Search strategies behind one propose/observe interface (and, later, the job driver)."""

from baobab.advisor._base import Strategy, TrialRecord, TrialStatus
from baobab.advisor._bayes import BayesStrategy
from baobab.advisor._factory import STRATEGIES, choose_strategy, make_strategy
from baobab.advisor._random import RandomStrategy
from baobab.advisor._space import Dimension, DimensionKind, FlatPoint, SearchSpace
from baobab.advisor._tpe import TpeStrategy

__all__ = [
    "STRATEGIES",
    "BayesStrategy",
    "Dimension",
    "DimensionKind",
    "FlatPoint",
    "RandomStrategy",
    "SearchSpace",
    "Strategy",
    "TpeStrategy",
    "TrialRecord",
    "TrialStatus",
    "choose_strategy",
    "make_strategy",
]
