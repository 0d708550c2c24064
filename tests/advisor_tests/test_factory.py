from __future__ import annotations

import pytest

from baobab.advisor import (
    STRATEGIES,
    BayesStrategy,
    EvolutionStrategy,
    RandomStrategy,
    TpeStrategy,
    choose_strategy,
    make_strategy,
)
from baobab.exceptions import KnobConfigError, StrategyError
from baobab.model import ArchKnob, CategoricalKnob, FixedKnob, FloatKnob, IntegerKnob, PolicyKnob
from baobab.testing import branin_knob_config


def test_names() -> None:
    assert STRATEGIES == ("auto", "random", "bayes", "tpe", "evolution", "enas")
    for name, cls in [
        ("random", RandomStrategy),
        ("bayes", BayesStrategy),
        ("tpe", TpeStrategy),
        ("evolution", EvolutionStrategy),
    ]:
        strategy = make_strategy(name, branin_knob_config(), seed=1)
        assert type(strategy) is cls and strategy.seed == 1


def test_options_reach_the_strategy() -> None:
    strategy = make_strategy("tpe", branin_knob_config(), n_startup_trials=3, multivariate=False)
    assert strategy.n_startup_trials == 3 and strategy.multivariate is False


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(StrategyError, match=r"unknown strategy 'grid'; valid strategies: auto, random, bayes, tpe"):
        make_strategy("grid", branin_knob_config())


def test_unknown_options_are_named() -> None:
    with pytest.raises(StrategyError, match=r"strategy 'bayes' does not take option\(s\) n_startup_trials, zeta; "):
        make_strategy("bayes", branin_knob_config(), zeta=1, n_startup_trials=3)
    with pytest.raises(StrategyError, match=r"strategy 'random' does not take option\(s\) xi; its options are: none"):
        make_strategy("random", branin_knob_config(), xi=0.1)
    with pytest.raises(StrategyError, match=r"strategy 'auto' takes no options, got xi"):
        make_strategy(None, branin_knob_config(), xi=0.1)


def test_invalid_knob_config_is_refused() -> None:
    with pytest.raises(KnobConfigError, match=r"knob 'lr': FloatKnob: value_min=1.0 is greater"):
        make_strategy("auto", {"lr": FloatKnob(1.0, 0.1)})


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "random"),
        ({"epochs": FixedKnob(3), "early": PolicyKnob("EARLY_STOP")}, "random"),
        (branin_knob_config(), "bayes"),
        ({**branin_knob_config(), "act": CategoricalKnob(["relu", "tanh"])}, "bayes"),
        ({"cell": ArchKnob([["none", "skip", "conv1", "conv3", "pool"]] * 6)}, "tpe"),  # NAS-Bench-201
        ({"cell": ArchKnob([["none", "skip", "conv1", "conv3", "pool"]] * 9)}, "tpe"),
        ({"lr": FloatKnob(1e-4, 1.0, is_exp=True), "act": CategoricalKnob(list(range(40)))}, "tpe"),
        ({f"x{i}": FloatKnob(0.0, 1.0) for i in range(9)}, "tpe"),
        ({f"x{i}": IntegerKnob(0, 9) for i in range(5)}, "tpe"),  # an HPOBench grid
        ({"units": IntegerKnob(0, 5), "act": CategoricalKnob(["relu", "tanh"])}, "tpe"),
        ({"lr": FloatKnob(1e-4, 1.0, is_exp=True), **{f"x{i}": IntegerKnob(0, 9) for i in range(7)}}, "bayes"),
    ],
)
def test_auto_choice(config: dict, expected: str) -> None:
    assert choose_strategy(config) == expected
    assert make_strategy(None, config, seed=0).name == expected
    assert make_strategy("auto", config, seed=0).name == expected
