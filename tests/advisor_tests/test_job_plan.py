"""check_job_plan: the plan of a sub-job from a job's specification, refused as the driver would refuse it."""

from __future__ import annotations

import pytest

from baobab.advisor import Budget, JobOptions, check_job_plan, parse_job_options
from baobab.advisor._plans import EnasPlan, PlainPlan, RetrainPlan, servable
from baobab.exceptions import StrategyError
from baobab.model import ArchKnob, FloatKnob, Policy, PolicyKnob

ENAS_CONFIG = {
    "arch": ArchKnob([["a", "b"]] * 3),
    **{name.lower(): PolicyKnob(name) for name in ("SHARE_PARAMS", "SKIP_TRAIN", "DOWNSCALE", "QUICK_EVAL")},
}
PLAIN_CONFIG = {"lr": FloatKnob(1e-4, 1e-1, is_exp=True), "early_stop": PolicyKnob("EARLY_STOP")}


def test_an_enas_sub_job_gets_the_enas_cycle() -> None:
    plan = check_job_plan("enas", ENAS_CONFIG, JobOptions(), trial_count=20, time_hours=None, workers=1)
    assert isinstance(plan, EnasPlan)


def test_an_enas_budget_too_small_is_refused_with_the_drivers_message() -> None:
    with pytest.raises(StrategyError, match=r"^strategy 'enas': StrategyError: MODEL_TRIAL_COUNT=8 is too small"):
        check_job_plan("enas", ENAS_CONFIG, JobOptions(), trial_count=8, time_hours=None, workers=1)


def test_an_enas_template_without_its_policies_is_refused() -> None:
    with pytest.raises(StrategyError, match=r"^strategy 'enas': StrategyError: .*SKIP_TRAIN"):
        check_job_plan("enas", {"arch": ArchKnob([["a"]])}, JobOptions(), trial_count=20, time_hours=1.0, workers=2)


@pytest.mark.parametrize("strategy", ["auto", "random", "bayes", "tpe", "no-such-strategy"])
def test_other_strategies_follow_the_jobs_options(strategy: str) -> None:
    plain = check_job_plan(strategy, PLAIN_CONFIG, JobOptions(), trial_count=3, time_hours=None, workers=1)
    assert isinstance(plain, PlainPlan)
    options = parse_job_options({"policies": {"EARLY_STOP": True}}, trial_count=5)
    retrain = check_job_plan(strategy, PLAIN_CONFIG, options, trial_count=5, time_hours=None, workers=1)
    assert isinstance(retrain, RetrainPlan)


def test_workers_is_the_budgets_gpu_count_or_the_cpu_slots() -> None:
    assert Budget(gpu_count=3, model_trial_count=1).workers(cpu_slots=8) == 3
    assert Budget(gpu_count=0, model_trial_count=1).workers(cpu_slots=8) == 8


def test_a_template_that_declares_none_of_the_asked_for_policies_gets_no_retrain_phase() -> None:
    # Its search trials are full models already: a final retrain of the best would repeat one.
    options = parse_job_options({"policies": {"EARLY_STOP": True, "DOWNSCALE": True}}, trial_count=5)
    plain = check_job_plan("random", {"lr": FloatKnob(1e-4, 1e-1)}, options, trial_count=5, time_hours=None, workers=1)
    assert isinstance(plain, PlainPlan)


def test_a_trial_run_with_any_cheapening_policy_is_not_served() -> None:
    # EARLY_STOP trains fewer epochs than the model it stands for: its full retrain is what serves.
    for policy in (Policy.EARLY_STOP, Policy.DOWNSCALE, Policy.QUICK_EVAL, Policy.SKIP_TRAIN):
        assert not servable({policy: True})
    assert servable({Policy.SHARE_PARAMS: True, Policy.EARLY_STOP: False})
