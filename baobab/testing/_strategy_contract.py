"""The contract every search strategy keeps, as a pytest suite to inherit.

A strategy's test module subclasses :class:`StrategyContract` and supplies the
``strategy_class`` fixture (and ``strategy_options`` when the defaults do not suit)::

    class TestMyStrategy(StrategyContract):
        @pytest.fixture
        def strategy_class(self):
            return MyStrategy

The suite checks what the job driver relies on: proposals are valid values of every
knob type with exact Python types, a seed makes them reproducible, a strategy rebuilt
from the history proposes what the original would have, parallel proposals in a
discrete space are distinct, failures are accepted, an invalid point (an architecture
that cannot be built) is never proposed again, and an empty space gives ``{}``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from baobab.advisor import Strategy, TrialRecord, TrialStatus
from baobab.exceptions import StrategyError
from baobab.model import (
    ArchKnob,
    CategoricalKnob,
    FixedKnob,
    FloatKnob,
    IntegerKnob,
    KnobConfig,
    Knobs,
    PolicyKnob,
    searchable_knobs,
    validate_knobs,
)

__all__ = ["StrategyContract", "every_knob_type", "run_search", "typed"]


def every_knob_type() -> KnobConfig:
    """A knob config with every knob type, degenerate ranges and look-alike choices."""
    return {
        "lr": FloatKnob(1e-5, 1.0, is_exp=True),
        "momentum": FloatKnob(0, 1),  # int bounds: proposals must still be floats
        "dropout": FloatKnob(0.25, 0.25),
        "units": IntegerKnob(1, 1024, is_exp=True),
        "depth": IntegerKnob(1, 4),
        "seven": IntegerKnob(7, 7),
        "flag": CategoricalKnob([1, True, 1.0, "1", None]),
        "arch": ArchKnob([["conv", "pool"], [0, 1, 2], [False, True]]),
        "epochs": FixedKnob(3),
        "early": PolicyKnob("EARLY_STOP"),
    }


def discrete_knob_config() -> KnobConfig:
    """48 points: enough for a dozen distinct parallel proposals, few enough to collide at random."""
    return {
        "kind": CategoricalKnob(["a", "b", "c", "d"]),
        "layers": IntegerKnob(1, 3),
        "arch": ArchKnob([["x", "y"], [0, 1]]),
    }


def synthetic_score(knobs: Mapping[str, Any]) -> float:
    """A score for any knob values: numbers pulled to mid-range, categoricals by index."""
    score = 0.0
    for value in knobs.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, float):
                score -= (math.log10(v) + 2) ** 2 if v > 0 else v**2
            elif isinstance(v, int) and not isinstance(v, bool):
                score -= (math.log2(v) - 3) ** 2 / 10 if v > 0 else 0.0
            else:
                score += len(repr(v)) / 10
    return score


def typed(knobs: Mapping[str, Any]) -> str:
    """Knob values as text that tells 1, True and 1.0 apart, for exact comparisons."""
    return repr(sorted(knobs.items()))


def run_search(
    strategy: Strategy,
    n_trials: int,
    *,
    fail: tuple[int, ...] = (),
    score: Callable[[Mapping[str, Any]], float] = synthetic_score,
    invalid: Callable[[Mapping[str, Any]], bool] = lambda knobs: False,
) -> list[Knobs]:
    """Propose, score and observe ``n_trials`` trials one by one; trials in ``fail`` fail, and
    those whose knobs ``invalid`` holds for end INVALID."""
    proposals = []
    for trial_id in range(n_trials):
        knobs = strategy.propose(trial_id)
        proposals.append(knobs)
        if trial_id in fail:
            strategy.observe(TrialRecord(trial_id, knobs, TrialStatus.FAILED, metadata={"error": "boom"}))
        elif invalid(knobs):
            strategy.observe(TrialRecord(trial_id, knobs, TrialStatus.INVALID))
        else:
            strategy.observe(TrialRecord(trial_id, knobs, TrialStatus.COMPLETED, score(knobs)))
    return proposals


class StrategyContract:
    """Inherit and supply ``strategy_class``; ``strategy_options`` defaults to none."""

    #: Trials per search: past the random start-up of every built-in strategy.
    n_trials = 14

    @pytest.fixture
    def strategy_class(self) -> type[Strategy]:
        raise NotImplementedError("supply a strategy_class fixture")

    @pytest.fixture
    def strategy_options(self) -> dict[str, Any]:
        return {}

    @pytest.fixture
    def make(self, strategy_class: type[Strategy], strategy_options: dict[str, Any]) -> Callable[..., Strategy]:
        def make(knob_config: KnobConfig, seed: int = 0) -> Strategy:
            return strategy_class(knob_config, seed=seed, **strategy_options)

        return make

    def test_proposals_are_valid_for_every_knob_type(self, make: Callable[..., Strategy]) -> None:
        config = every_knob_type()
        space = searchable_knobs(config)
        for knobs in run_search(make(config), self.n_trials, fail=(3,)):
            validate_knobs(space, knobs)
            for name in ("lr", "momentum", "dropout"):
                assert type(knobs[name]) is float, (name, knobs[name])
            for name in ("units", "depth", "seven"):
                assert type(knobs[name]) is int, (name, knobs[name])
            assert type(knobs["arch"]) is list
            assert knobs["dropout"] == 0.25 and knobs["seven"] == 7

    def test_same_seed_same_proposals(self, make: Callable[..., Strategy]) -> None:
        first = run_search(make(every_knob_type(), seed=7), self.n_trials, fail=(2,))
        second = run_search(make(every_knob_type(), seed=7), self.n_trials, fail=(2,))
        other = run_search(make(every_knob_type(), seed=8), self.n_trials, fail=(2,))
        assert [typed(k) for k in first] == [typed(k) for k in second]
        assert [typed(k) for k in first] != [typed(k) for k in other]

    def test_rebuild_proposes_what_the_original_would(
        self, make: Callable[..., Strategy], strategy_class: type[Strategy], strategy_options: dict[str, Any]
    ) -> None:
        original = make(every_knob_type(), seed=3)
        # Parallel workers: five trials out at once, finishing in a shuffled order.
        order = random.Random(0)
        running: dict[int, Knobs] = {}
        for trial_id in range(self.n_trials):
            running[trial_id] = original.propose(trial_id, pending=list(running.values()))
            if len(running) == 5 or trial_id == self.n_trials - 1:
                for done in order.sample(sorted(running), k=min(3, len(running))):
                    knobs = running.pop(done)
                    if done % 5 == 4:
                        original.observe(TrialRecord(done, knobs, TrialStatus.FAILED))
                    else:
                        original.observe(TrialRecord(done, knobs, TrialStatus.COMPLETED, synthetic_score(knobs)))
        history = original.history
        assert any(r.status is TrialStatus.FAILED for r in history)
        order.shuffle(history)
        rebuilt = strategy_class.rebuild(every_knob_type(), history, seed=3, **strategy_options)
        assert [r.trial_id for r in rebuilt.history] == [r.trial_id for r in original.history]
        pending = list(running.values())
        assert typed(rebuilt.propose(self.n_trials, pending)) == typed(original.propose(self.n_trials, pending))

    def test_parallel_proposals_are_distinct_in_a_discrete_space(self, make: Callable[..., Strategy]) -> None:
        strategy = make(discrete_knob_config(), seed=1)
        seen = run_search(strategy, 8, fail=(5,))
        pending: list[Knobs] = []
        for trial_id in range(8, 20):
            pending.append(strategy.propose(trial_id, pending=pending))
        texts = [typed(k) for k in seen + pending]
        assert len(set(texts)) == len(texts), "a proposal repeats an observed or pending point"

    def test_failed_records_are_accepted(self, make: Callable[..., Strategy]) -> None:
        strategy = make(every_knob_type())
        proposals = run_search(strategy, self.n_trials, fail=tuple(range(self.n_trials)))
        assert all(r.status is TrialStatus.FAILED for r in strategy.history)
        validate_knobs(searchable_knobs(every_knob_type()), strategy.propose(self.n_trials))
        assert len(proposals) == self.n_trials

    def test_an_invalid_point_is_never_proposed_again(self, make: Callable[..., Strategy]) -> None:
        strategy = make(discrete_knob_config(), seed=4)
        proposals = run_search(strategy, 30, invalid=lambda knobs: knobs["kind"] == "d")  # a quarter of the space
        invalid: set[str] = set()
        for trial_id, knobs in enumerate(proposals):
            assert typed(knobs) not in invalid, f"trial {trial_id} proposes an INVALID point again: {knobs}"
            if knobs["kind"] == "d":
                invalid.add(typed(knobs))
        records = [r for r in strategy.history if r.status is TrialStatus.INVALID]
        assert len(records) == len(invalid) > 0 and all(r.score is None for r in records)

    def test_invalid_records_are_accepted(self, make: Callable[..., Strategy]) -> None:
        strategy = make(every_knob_type())
        run_search(strategy, self.n_trials, invalid=lambda knobs: True)
        assert all(r.status is TrialStatus.INVALID for r in strategy.history)
        validate_knobs(searchable_knobs(every_knob_type()), strategy.propose(self.n_trials))

    def test_empty_space_proposes_nothing(self, make: Callable[..., Strategy]) -> None:
        for config in ({}, {"epochs": FixedKnob(3), "quick": PolicyKnob("QUICK_EVAL")}):
            assert run_search(make(config), self.n_trials, fail=(1,)) == [{}] * self.n_trials

    def test_observe_rejects_knobs_outside_the_space(self, make: Callable[..., Strategy]) -> None:
        strategy = make(discrete_knob_config())
        knobs = {"kind": "e", "layers": 1, "arch": ["x", 0]}
        with pytest.raises(StrategyError, match=r"trial 0: .*'kind'.*'e' is not one of"):
            strategy.observe(TrialRecord(0, knobs, TrialStatus.COMPLETED, 1.0))
        with pytest.raises(StrategyError, match=r"trial 1: knob 'layers' has no value"):
            strategy.observe(TrialRecord(1, {"kind": "a", "arch": ["x", 0]}, TrialStatus.COMPLETED, 1.0))
