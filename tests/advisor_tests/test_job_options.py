"""A job's options: what parses, what the driver reads of them, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from baobab import Placement, Settings
from baobab.advisor import (
    STOPPING_RULES,
    FusionMode,
    JobOptionsError,
    StoppingRuleName,
    TrainJobOptions,
    parse_job_options,
)


def test_no_options_ask_for_nothing() -> None:
    for nothing in (None, {}, {"policies": None, "fusion": None}):  # null is "not set"
        options = parse_job_options(nothing)
        assert options.stopping_rule is StoppingRuleName.NONE and not options.policies and not options.reduced_search
        assert options.fusion is FusionMode.OFF and not options.deterministic
    declared = TrainJobOptions.parse(None)
    assert (declared.warm_start, declared.base_model, declared.deterministic) == (True, None, False)


def test_every_stopping_rule_has_its_name() -> None:
    assert {rule.value for rule in StoppingRuleName} == set(STOPPING_RULES)


def test_what_a_job_stores_reads_back_the_same() -> None:
    sent = {
        "early_stopping": {"rule": "asha", "eta": 2},
        "policies": {"EARLY_STOP": True, "SHARE_PARAMS": "best", "final_trials": 2},
        "fusion": {"max_group": 4},
        "enas": {"train_trials": 2},
        "warm_start": False,
        "base_model": 12,
        "deterministic": True,
    }
    stored = TrainJobOptions.parse(sent).to_json()
    assert TrainJobOptions.parse(stored) == TrainJobOptions.parse(sent)
    assert parse_job_options(stored, trial_count=5) == parse_job_options(sent, trial_count=5)
    assert (stored["warm_start"], stored["base_model"], stored["deterministic"]) == (False, 12, True)


def test_deterministic_reaches_the_drivers_options() -> None:
    assert parse_job_options({"deterministic": True}).deterministic
    assert not parse_job_options({"deterministic": False}).deterministic


def test_policies_and_rule_parse() -> None:
    options = parse_job_options(
        {
            "early_stopping": {"rule": "asha", "eta": 2, "metric": "loss", "mode": "min"},
            "policies": {"EARLY_STOP": True, "DOWNSCALE": False, "SHARE_PARAMS": "best", "final_trials": 2},
        },
        trial_count=5,
    )
    assert options.stopping_rule == "asha" and dict(options.stopping_options) == {
        "eta": 2,
        "metric": "loss",
        "mode": "min",
    }
    assert options.policies == {"EARLY_STOP", "SHARE_PARAMS"} and options.reduced_search == {"EARLY_STOP"}
    assert (options.share_from, options.final_trials) == ("best", 2)
    assert options.stopping_rule_for().name == "asha"
    assert parse_job_options({"early_stopping": "median"}).stopping_rule == "median"


def test_fusion_parses() -> None:
    assert parse_job_options({}).enas == {}
    enas = {"train_trials": 2, "evaluate_trials": 6, "top_k": 4, "warmup_fraction": 0.25}
    assert parse_job_options({"enas": enas}).enas == enas
    assert parse_job_options({}).fusion == "off"  # the default: no benchmark has shown "auto" paying on CPUs
    assert parse_job_options({"fusion": "auto"}).fusion == "auto"  # experimental, for those who ask
    assert parse_job_options({"fusion": "off"}).fusion == "off"
    options = parse_job_options({"fusion": {"max_group": 16}})
    assert (options.fusion, options.max_group) == (FusionMode.MAX_GROUP, 16)
    assert options.largest_group(measured=False) == 16


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ([1], "options", "must be an object"),
        ({"stopping": "asha"}, "options.stopping", "unknown key 'stopping'; known keys: early_stopping, policies"),
        ({"early_stopping": {"rule": "hyperband"}}, "options.early_stopping.rule", "'none', 'asha' or 'median'"),
        ({"early_stopping": {"eta": 3}}, "options.early_stopping.rule", "is required"),
        ({"early_stopping": {"rule": "asha", "eta": 1}}, "options.early_stopping", "eta=1"),
        ({"early_stopping": {"rule": "median", "eta": 3}}, "options.early_stopping", "does not take"),
        ({"early_stopping": 3}, "options.early_stopping", "rule name"),
        ({"policies": ["EARLY_STOP"]}, "options.policies", "must be an object, got ['EARLY_STOP']"),
        ({"policies": {"SKIP_TRAIN": True}}, "options.policies.SKIP_TRAIN", "enas"),
        ({"policies": {"EARLY_STOP": "yes"}}, "options.policies.EARLY_STOP", "must be true or false, got 'yes'"),
        ({"policies": {"EARLY_STOP": 1}}, "options.policies.EARLY_STOP", "must be true or false, got 1"),
        ({"policies": {"SHARE_PARAMS": "oldest"}}, "options.policies.SHARE_PARAMS", '"best"'),
        ({"policies": {"SHARE_PARAMS": 1}}, "options.policies.SHARE_PARAMS", '"recent"'),
        ({"policies": {"final_trials": 0}}, "options.policies.final_trials", "must be >= 1, got 0"),
        ({"policies": {"final_trials": 1.5}}, "options.policies.final_trials", "must be a whole number, got 1.5"),
        ({"policies": {"final_factor": 0.5}}, "options.policies.final_factor", "must be >= 1"),
        ({"policies": {"final_fraction": 1.5}}, "options.policies.final_fraction", "must be < 1"),
        ({"policies": {"DOWNSCALE": True, "final_trials": 3}}, "budget.MODEL_TRIAL_COUNT", "no search trial"),
        ({"fusion": "on"}, "options.fusion", "must be 'off' or 'auto', got 'on'"),
        ({"fusion": 8}, "options.fusion", '"off", "auto" or an object'),
        ({"fusion": {"max_group": 0}}, "options.fusion.max_group", "must be >= 1"),
        ({"fusion": {"max_group": 2048}}, "options.fusion.max_group", "must be <= 1024"),
        ({"fusion": {"max_group": True}}, "options.fusion.max_group", "whole number"),
        ({"fusion": {"max_group": 4, "min_group": 2}}, "options.fusion.min_group", "known keys: max_group"),
        ({"enas": 2}, "options.enas", "must be an object"),
        ({"enas": {"cycles": 2}}, "options.enas.cycles", "known keys: train_trials, evaluate_trials"),
        ({"enas": {"train_trials": 0}}, "options.enas.train_trials", "train_trials=0 must be a whole number >= 1"),
        ({"enas": {"evaluate_trials": 2.5}}, "options.enas.evaluate_trials", "must be a whole number"),
        ({"enas": {"top_k": True}}, "options.enas.top_k", "must be a whole number"),
        ({"enas": {"warmup_fraction": 1}}, "options.enas.warmup_fraction", "a number in [0, 1)"),
        ({"enas": {"warmup_fraction": "half"}}, "options.enas.warmup_fraction", "must be a number"),
        ({"warm_start": "no"}, "options.warm_start", "must be true or false, got 'no'"),
        ({"warm_start": 0}, "options.warm_start", "must be true or false, got 0"),
        ({"base_model": 0}, "options.base_model", "must be >= 1, got 0"),
        ({"base_model": "12"}, "options.base_model", "must be a whole number, got '12'"),
        ({"base_model": True}, "options.base_model", "must be a whole number, got True"),
        ({"deterministic": "yes"}, "options.deterministic", "must be true or false, got 'yes'"),
        ({"deterministic": 1}, "options.deterministic", "must be true or false, got 1"),
    ],
)
def test_bad_options_name_their_field(options: object, field: str, words: str) -> None:
    with pytest.raises(JobOptionsError) as raised:
        parse_job_options(options, trial_count=3)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")
    assert words in str(raised.value)


def test_the_driver_places_trials_by_the_rules_unless_told_otherwise(tmp_path: Path) -> None:
    # The planner's search stays opt-in until a benchmark shows it at least as good as the rules.
    assert Settings.from_env(environ={}, home=tmp_path).placement is Placement.RULES
    assert Settings.from_env(environ={"BAOBAB_PLACEMENT": "search"}, home=tmp_path).placement is Placement.SEARCH
