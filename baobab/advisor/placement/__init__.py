"""Search-based placement (FlexFlow's idea): a cost model from measurements, a simulator that
plays a plan forward, and a search over plans from greedy baselines. Pure: no store, no IO."""

from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._driving import (
    DRIVER_SHARE,
    MOST_PER_SUB_JOB,
    SPARE_JOBS,
    WORK_SHARE,
    Decision,
    Outlook,
    Planner,
    fair_shares,
)
from baobab.advisor.placement._forecast import MAX_FORECAST_TRIALS, Forecast, Measured, forecast_job, stopped_share
from baobab.advisor.placement._search import BASELINES, METHODS, Choice, choose_plan, estimator
from baobab.advisor.placement._simulator import Outcome, simulate
from baobab.advisor.placement._work import Estimate, Job, Launch, Machine, Pending, Plan

__all__ = [
    "BASELINES",
    "DRIVER_SHARE",
    "MAX_FORECAST_TRIALS",
    "METHODS",
    "MOST_PER_SUB_JOB",
    "SPARE_JOBS",
    "WORK_SHARE",
    "Choice",
    "CostModel",
    "Decision",
    "Estimate",
    "Forecast",
    "Job",
    "Launch",
    "Machine",
    "Measured",
    "Outcome",
    "Outlook",
    "Pending",
    "Planner",
    "Plan",
    "choose_plan",
    "estimator",
    "fair_shares",
    "forecast_job",
    "simulate",
    "stopped_share",
]
