"""Strategy.propose_batch: the proposals of a fused group, made at once."""

from __future__ import annotations

import pytest

from baobab.advisor import TrialRecord, TrialStatus, make_strategy
from baobab.model import CategoricalKnob
from baobab.testing import branin_knob_config

#: A small grid: a batch that ignored its own earlier proposals would repeat points of it.
GRID = {"a": CategoricalKnob([1, 2, 3]), "b": CategoricalKnob(["x", "y"])}


def observed(name: str, config, scores: list[float]):
    strategy = make_strategy(name, config, seed=3)
    for number, score in enumerate(scores):
        strategy.observe(TrialRecord(number, strategy.propose(number), TrialStatus.COMPLETED, score))
    return strategy


@pytest.mark.parametrize("name", ["random", "bayes", "tpe", "evolution"])
def test_a_batch_is_what_proposing_one_after_the_other_gives(name: str) -> None:
    # bayes and tpe past their random start-up: the batch's own proposals are their constant liars.
    strategy = observed(name, branin_knob_config(), [float(i % 4) for i in range(12)])
    pending = [strategy.propose(12)]
    batch = strategy.propose_batch([13, 14, 15], pending)
    one_by_one = []
    for number in (13, 14, 15):
        one_by_one.append(strategy.propose(number, pending + one_by_one))
    assert batch == one_by_one
    assert len({tuple(sorted(p.items())) for p in batch}) == 3


@pytest.mark.parametrize("name", ["random", "bayes", "tpe"])
def test_a_batch_in_a_discrete_space_proposes_no_point_twice(name: str) -> None:
    strategy = observed(name, GRID, [0.5, 0.1])
    taken = [tuple(sorted(r.knobs.items())) for r in strategy.history]
    batch = strategy.propose_batch([2, 3, 4, 5])
    points = [tuple(sorted(p.items())) for p in batch]
    assert len(set(points)) == 4 and not set(points) & set(taken)
