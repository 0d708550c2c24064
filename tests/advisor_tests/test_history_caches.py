"""The history a strategy keeps as records arrive: its caches against the history they summarise.

A strategy keeps its records' points, their order, the completed ones ranked by score and a
count per observed point, updated by ``observe`` (see ``baobab/advisor/_base.py``). These tests
feed records out of order, observe some trial ids again with other knobs or another status,
and check every cache against a computation from the history alone, and the proposals of the
strategy against those of one rebuilt from its history.
"""

from __future__ import annotations

import math
import random

import pytest

from baobab.advisor import BayesStrategy, EvolutionStrategy, RandomStrategy, Strategy, TpeStrategy, TrialRecord
from baobab.advisor import TrialStatus as S
from baobab.model import CategoricalKnob, FloatKnob, IntegerKnob
from baobab.testing import typed

CONFIG = {"kind": CategoricalKnob(["a", "b", "c", "d"]), "layers": IntegerKnob(1, 3), "lr": FloatKnob(0.0, 1.0)}
DISCRETE = {"kind": CategoricalKnob(["a", "b", "c", "d"]), "layers": IntegerKnob(1, 3), "width": IntegerKnob(0, 4)}


def records(config: dict, n: int, seed: int) -> list[TrialRecord]:
    """``n`` records with ties in score, failures, invalid points and repeated points, in a shuffled order,
    followed by a second record for some trial ids (observing an id again replaces its record)."""
    rng = random.Random(seed)
    draw = RandomStrategy(config, seed=seed)
    out = []
    for trial_id in range(n):
        knobs = draw.propose(trial_id) if trial_id % 7 else draw.propose(0)  # every 7th repeats a point
        roll = rng.random()
        if roll < 0.1:
            out.append(TrialRecord(trial_id, knobs, S.FAILED))
        elif roll < 0.15:
            out.append(TrialRecord(trial_id, knobs, S.INVALID))
        else:
            out.append(TrialRecord(trial_id, knobs, S.COMPLETED, float(rng.randint(0, 9))))  # ties
    rng.shuffle(out)
    again = [
        TrialRecord(r.trial_id, draw.propose(1000 + r.trial_id), S.COMPLETED, float(rng.randint(0, 9)))
        if r.status is S.FAILED
        else TrialRecord(r.trial_id, r.knobs, S.FAILED)
        for r in rng.sample(out, k=n // 5)
    ]
    return out + again


@pytest.mark.parametrize("seed", [0, 1])
def test_the_caches_are_what_the_history_gives(seed: int) -> None:
    strategy = RandomStrategy(CONFIG, seed=seed)
    for record in records(CONFIG, 80, seed):
        strategy.observe(record)
    history = strategy.history
    assert [r.trial_id for r in history] == sorted(r.trial_id for r in history) == list(range(80))
    completed = [r for r in history if r.status is S.COMPLETED]
    ranked = sorted(completed, key=lambda r: (-r.score, r.trial_id))  # type: ignore[operator]
    assert strategy.best(10) == [r.trial_id for r in ranked[:10]]
    assert strategy.best(1000) == [r.trial_id for r in ranked]
    assert strategy.n_completed == len(completed) and strategy.n_observed == 80
    assert strategy.worst_score() == min(r.score for r in completed)  # type: ignore[type-var]
    assert strategy.recent(7) == list(range(73, 80))
    assert strategy.recent(7, completed=True) == [r.trial_id for r in completed][-7:]
    assert strategy.recent(0) == [] and strategy.recent(500) == list(range(80))
    points = {strategy.search_space.flatten(r.knobs) for r in history}
    assert set(strategy.taken([])) == points and len(strategy.taken([])) == len(points)
    new = strategy.propose(500)
    taken = strategy.taken([new, new, history[0].knobs])
    assert len(taken) == len(points) + 1 and strategy.search_space.flatten(new) in taken
    assert sorted(taken) == sorted(points | {strategy.search_space.flatten(new)})


def test_a_replaced_record_leaves_no_trace() -> None:
    strategy = RandomStrategy(DISCRETE, seed=0)
    first = {"kind": "a", "layers": 1, "width": 0}
    second = {"kind": "b", "layers": 2, "width": 3}
    strategy.observe(TrialRecord(5, first, S.COMPLETED, 9.0))
    strategy.observe(TrialRecord(5, second, S.FAILED))
    assert strategy.best(5) == [] and strategy.worst_score() is None and strategy.n_observed == 1
    assert set(strategy.taken([])) == {strategy.search_space.flatten(second)}
    strategy.observe(TrialRecord(5, second, S.COMPLETED, 1.0))
    assert strategy.best(5) == [5] and strategy.score(5) == 1.0


def test_a_nan_score_ranks_last() -> None:
    strategy = RandomStrategy(CONFIG, seed=0)
    knobs = strategy.propose(0)
    for trial_id, score in enumerate([1.0, math.nan, 3.0]):
        strategy.observe(TrialRecord(trial_id, knobs, S.COMPLETED, score))
    assert strategy.best(3) == [2, 0, 1]
    strategy.observe(TrialRecord(1, knobs, S.COMPLETED, 2.0))  # the NaN record replaced
    assert strategy.best(3) == [2, 1, 0]


def test_history_keeps_the_searchable_knobs_and_the_metadata() -> None:
    strategy = RandomStrategy(CONFIG, seed=0)
    knobs = {**strategy.propose(0), "epochs": 3}
    strategy.observe(TrialRecord(0, knobs, S.COMPLETED, 1.0, {"phase": "search"}))
    strategy.observe(TrialRecord(1, knobs, S.FAILED))
    first, second = strategy.history
    assert typed(first.knobs) == typed({k: v for k, v in knobs.items() if k != "epochs"})
    assert first.metadata == {"phase": "search"} and second.metadata == {}


@pytest.mark.parametrize(
    ("cls", "options"),
    [
        (RandomStrategy, {}),
        (EvolutionStrategy, {"population_size": 6, "sample_size": 2}),
        (TpeStrategy, {"n_startup_trials": 5, "max_recent": 20}),
        (BayesStrategy, {"n_best": 5, "n_recent": 10, "n_candidates": 50, "n_local": 10}),
    ],
)
@pytest.mark.parametrize("config", [CONFIG, DISCRETE], ids=["mixed", "discrete"])
def test_a_strategy_fed_out_of_order_with_replacements_proposes_as_its_rebuild(
    cls: type[Strategy], options: dict, config: dict
) -> None:
    original = cls(config, seed=3, **options)
    for record in records(config, 60, 3):
        original.observe(record)
    rebuilt = cls.rebuild(config, original.history, seed=3, **options)
    pending = [original.propose(100), original.propose(101)]
    for trial_id in (102, 103):
        assert typed(rebuilt.propose(trial_id, pending)) == typed(original.propose(trial_id, pending))
