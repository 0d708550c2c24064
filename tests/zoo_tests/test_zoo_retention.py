"""Retention: the most valuable set within the budget, value decaying with age and growing with use."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import torch
from sqlalchemy import select
from zoo_world import World, cnn

from baobab.store import ZooModel, session_scope
from baobab.zoo import DbZoo, RetentionItem, choose_kept, enforce_budget, model_value, record_parent, trace_graph
from baobab.zoo._warm_start import register_module

NOW = datetime(2031, 5, 1, tzinfo=UTC)


def _value(items: list[RetentionItem], ids: set[int]) -> float:
    return sum(model_value(i.times_chosen, (NOW - i.created_at).days) for i in items if i.id in ids)


def test_value_halves_with_each_half_life_and_grows_with_each_choice() -> None:
    assert model_value(0, 0) == 1.0
    assert model_value(0, 30) == pytest.approx(0.5)
    assert model_value(3, 60) == pytest.approx(1.0)
    assert model_value(1, 10) > model_value(0, 10) > model_value(0, 20)


@pytest.mark.parametrize("seed", range(5))
def test_the_kept_set_is_the_most_valuable_that_fits(seed: int) -> None:
    rng = np.random.default_rng(seed)
    unit = 1000  # sizes in whole units of budget / resolution: the rounding changes nothing
    items = [
        RetentionItem(
            id=i,
            size_bytes=int(rng.integers(1, 40)) * unit,
            created_at=NOW - timedelta(days=int(rng.integers(0, 120))),
            times_chosen=int(rng.integers(0, 4)),
        )
        for i in range(12)
    ]
    budget = 100 * unit
    kept = choose_kept(items, budget, NOW, resolution=100)
    assert sum(i.size_bytes for i in items if i.id in kept) <= budget
    best = max(
        _value(items, {i.id for i in combo})
        for r in range(len(items) + 1)
        for combo in itertools.combinations(items, r)
        if sum(i.size_bytes for i in combo) <= budget
    )
    assert _value(items, kept) == pytest.approx(best)


def test_everything_is_kept_under_budget_and_nothing_larger_than_it() -> None:
    items = [RetentionItem(1, 10, NOW, 0), RetentionItem(2, 20, NOW, 0)]
    assert choose_kept(items, 30, NOW) == {1, 2}
    assert choose_kept([*items, RetentionItem(3, 31, NOW, 99)], 30, NOW) == {1, 2}


def test_one_big_valuable_model_beats_many_small_worthless_ones() -> None:
    """What a greedy by value per byte gets wrong."""
    old = NOW - timedelta(days=300)
    small = [RetentionItem(i, 10, old, 0) for i in range(1, 4)]
    big = RetentionItem(9, 100, NOW, 2)
    assert choose_kept([*small, big], 100, NOW) == {9}


def test_the_zoo_evicts_down_to_its_budget_and_deletes_only_parameters_it_owns(world: World) -> None:
    owner = world.user()
    sub_job = world.job(owner)
    module = cnn(4, 1)
    trial = world.trial(sub_job, module=module)
    world.finish(trial, 0.7, module)
    zoo = DbZoo(world.engine, world.artifacts, owner_id=owner, budget_bytes=10**9)
    example = torch.zeros(2, 1, 28, 28)
    from_trial = zoo.register_trial(trial, trace_graph(module, example))
    uploads = [
        register_module(zoo, cnn(4, 1), example, score=0.6, task="IMAGE_CLASSIFICATION", name=f"u{i}") for i in range(3)
    ]
    with session_scope(world.engine) as session:
        rows = {row.id: row for row in session.scalars(select(ZooModel))}
    size = rows[uploads[0]].size_bytes
    assert rows[from_trial].owns_params is False and rows[uploads[0]].owns_params is True
    record_parent(world.engine, uploads[2], 0.9)  # chosen once: worth twice the others
    with session_scope(world.engine) as session:  # the trial's model is the oldest
        for row in session.scalars(select(ZooModel)):
            row.created_at = NOW - timedelta(days=90 if row.id == from_trial else 1)
    evicted = enforce_budget(world.engine, world.artifacts, 2 * size + size // 2, now=NOW)
    assert set(evicted) == {from_trial, uploads[0]} or set(evicted) == {from_trial, uploads[1]}
    with session_scope(world.engine) as session:
        left = set(session.scalars(select(ZooModel.id)))
    assert uploads[2] in left and len(left) == 2
    gone = next(i for i in evicted if i != from_trial)
    assert not world.artifacts.exists(rows[gone].params_path)  # the zoo's own copy is deleted
    assert world.artifacts.exists(rows[from_trial].params_path)  # the trial keeps its parameters
    assert enforce_budget(world.engine, world.artifacts, 10**9, now=NOW) == []
