"""Search-based placement (FlexFlow's idea): a cost model from measurements, a simulator that
plays a plan forward, and a search over plans from greedy baselines. Pure: no store, no IO."""

from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._search import BASELINES, METHODS, Choice, choose_plan, estimator
from baobab.advisor.placement._simulator import Outcome, simulate
from baobab.advisor.placement._work import Estimate, Job, Launch, Machine, Pending, Plan

__all__ = [
    "BASELINES",
    "METHODS",
    "Choice",
    "CostModel",
    "Estimate",
    "Job",
    "Launch",
    "Machine",
    "Outcome",
    "Pending",
    "Plan",
    "choose_plan",
    "estimator",
    "simulate",
]
