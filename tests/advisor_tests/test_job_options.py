"""Job options in train_args: what parses, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from baobab import Placement, Settings
from baobab.advisor import JobOptionsError, parse_job_options


def test_no_options_ask_for_nothing() -> None:
    options = parse_job_options({"lr": 0.1})
    assert options.stopping_rule == "none" and not options.policies and not options.reduced_search


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
    assert (options.fusion, options.max_group) == ("max_group", 16)


@pytest.mark.parametrize(
    ("train_args", "field", "words"),
    [
        ({"early_stopping": {"rule": "hyperband"}}, "train_args.early_stopping.rule", "asha, median"),
        ({"early_stopping": {"rule": "asha", "eta": 1}}, "train_args.early_stopping", "eta=1"),
        ({"early_stopping": {"rule": "median", "eta": 3}}, "train_args.early_stopping", "does not take"),
        ({"early_stopping": 3}, "train_args.early_stopping", "rule name"),
        ({"policies": ["EARLY_STOP"]}, "train_args.policies", "object"),
        ({"policies": {"SKIP_TRAIN": True}}, "train_args.policies.SKIP_TRAIN", "enas"),
        ({"policies": {"EARLY_STOP": "yes"}}, "train_args.policies.EARLY_STOP", "true or false"),
        ({"policies": {"SHARE_PARAMS": "oldest"}}, "train_args.policies.SHARE_PARAMS", '"best"'),
        ({"policies": {"final_trials": 0}}, "train_args.policies.final_trials", ">= 1"),
        ({"policies": {"final_fraction": 1.5}}, "train_args.policies.final_fraction", "[0, 1)"),
        ({"policies": {"DOWNSCALE": True, "final_trials": 3}}, "budget.MODEL_TRIAL_COUNT", "no search trial"),
        ({"fusion": "on"}, "train_args.fusion", '"auto", "off" or an object'),
        ({"fusion": {"max_group": 0}}, "train_args.fusion.max_group", "from 1 to 1024"),
        ({"fusion": {"max_group": True}}, "train_args.fusion.max_group", "whole number"),
        ({"fusion": {"max_group": 4, "min_group": 2}}, "train_args.fusion", "max_group"),
        ({"enas": 2}, "train_args.enas", "object"),
        ({"enas": {"cycles": 2}}, "train_args.enas.cycles", "known keys: train_trials, evaluate_trials"),
        ({"enas": {"train_trials": 0}}, "train_args.enas.train_trials", "train_trials=0 must be a whole number >= 1"),
        ({"enas": {"evaluate_trials": 2.5}}, "train_args.enas.evaluate_trials", "a whole number >= 1"),
        ({"enas": {"top_k": True}}, "train_args.enas.top_k", "a whole number >= 1"),
        ({"enas": {"warmup_fraction": 1}}, "train_args.enas.warmup_fraction", "a number in [0, 1)"),
        ({"enas": {"warmup_fraction": "half"}}, "train_args.enas.warmup_fraction", "a number in [0, 1)"),
    ],
)
def test_bad_options_name_their_field(train_args: dict, field: str, words: str) -> None:
    with pytest.raises(JobOptionsError) as raised:
        parse_job_options(train_args, trial_count=3)
    assert raised.value.field == field
    assert words in str(raised.value)


def test_the_driver_places_trials_by_the_rules_unless_told_otherwise(tmp_path: Path) -> None:
    # The planner's search stays opt-in until a benchmark shows it at least as good as the rules.
    assert Settings.from_env(environ={}, home=tmp_path).placement is Placement.RULES
    assert Settings.from_env(environ={"BAOBAB_PLACEMENT": "search"}, home=tmp_path).placement is Placement.SEARCH
