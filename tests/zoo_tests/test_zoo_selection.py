"""Choosing the parent: buckets then accuracy, the cuts, exactness of the pruning, speed with 1,000 models."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pytest
import torch
from zoo_world import mlp

from baobab.zoo import (
    Candidate,
    FeatureCache,
    ModelGraph,
    Selection,
    SelectionPolicy,
    match_graphs,
    select_parent,
    trace_graph,
)
from baobab.zoo._synthetic import resnet_graph, synthetic_zoo


def _zoo(entries: list[tuple[ModelGraph, float]]) -> tuple[list[Candidate], dict[int, ModelGraph]]:
    graphs = {i + 1: graph for i, (graph, _) in enumerate(entries)}
    candidates = [Candidate(i + 1, score, graph.fingerprint) for i, (graph, score) in enumerate(entries)]
    return candidates, graphs


def _select(child: ModelGraph, entries: list[tuple[ModelGraph, float]], **policy: float) -> Selection:
    candidates, graphs = _zoo(entries)
    return select_parent(child, candidates, lambda ids: {i: graphs[i] for i in ids}, policy=SelectionPolicy(**policy))


def _brute_force(child: ModelGraph, entries: list[tuple[ModelGraph, float]], policy: SelectionPolicy) -> int | None:
    """The rule applied to every candidate, no pruning: the reference."""
    best_score = max(s for _, s in entries)
    cut = best_score - policy.low_accuracy_margin * abs(best_score)
    best = None
    for i, (graph, score) in enumerate(entries):
        if score < cut:
            continue
        sim = match_graphs(graph, child).similarity
        if sim <= 0:
            continue
        key = (policy.bucket(sim), score, sim, -(i + 1))
        if best is None or key > best[0]:
            best = (key, i + 1)
    return None if best is None else best[1]


def test_the_most_accurate_model_of_the_most_similar_bucket_wins_not_the_most_accurate_overall() -> None:
    child = resnet_graph((2, 2, 2, 2), (32, 64, 128, 256))
    entries = [
        (resnet_graph((2, 2, 2, 2), (32, 64, 128, 256)), 0.80),  # identical: bucket 9
        (resnet_graph((2, 2, 2, 2), (32, 64, 128, 264)), 0.85),  # nearly identical: bucket 9, more accurate
        (resnet_graph((3, 4, 6, 3), (96, 192, 384, 768)), 0.99),  # the most accurate, but far
    ]
    selection = _select(child, entries, low_accuracy_margin=1.0)
    assert selection.parent_id == 2
    assert 0.9 <= selection.similarity < 1.0
    assert selection.match is not None and selection.match.matched_share == 1.0
    assert "zoo model 2" in selection.reason


def test_low_accuracy_models_are_cut_before_buckets() -> None:
    child = resnet_graph((1, 1, 1, 1), (16, 32, 64, 128))
    entries = [(resnet_graph((1, 1, 1, 1), (16, 32, 64, 128)), 0.1)] + [  # similarity 1, least accurate
        (resnet_graph((1, 1, 1, 1), (48 + 8 * k, 96, 192, 384)), 0.8 + 0.01 * k)
        for k in range(4)  # about 0.65
    ]
    assert _select(child, entries, low_accuracy_margin=1.0).parent_id == 1  # identical wins when kept
    cut = _select(child, entries)  # 0.1 is more than 10% below the best, 0.83
    assert cut.parent_id != 1 and cut.candidates == 4
    assert _select(child, entries, low_accuracy_margin=1.0, min_score=0.5).parent_id != 1


def test_too_few_matched_layers_means_no_warm_start() -> None:
    child = trace_graph(mlp([32, 32, 32, 32, 32]), torch.zeros(2, 10))
    parent = trace_graph(mlp([32]), torch.zeros(2, 10))
    weak = _select(child, [(parent, 0.9)], low_accuracy_margin=1.0, min_matched_share=0.5)
    assert weak.parent_id is None
    assert "below the 50% needed" in weak.reason and weak.similarity > 0
    assert _select(child, [(parent, 0.9)], low_accuracy_margin=1.0, min_matched_share=0.3).parent_id == 1


def test_an_untraced_child_or_an_empty_zoo_trains_cold() -> None:
    child = resnet_graph((1, 1), (8, 16))
    untraced = ModelGraph(child.nodes, child.input_shape, child.output_shape, traced=False, note="it branches")
    assert _select(untraced, [(child, 0.9)]).parent_id is None
    assert "could not be traced" in _select(untraced, [(child, 0.9)]).reason
    empty = _select(child, [])
    assert empty.parent_id is None and "no zoo model" in empty.reason


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pruning_gives_what_scoring_every_candidate_gives(seed: int) -> None:
    rng = np.random.default_rng(seed)
    entries = synthetic_zoo(40, seed=seed, distinct=seed != 2)
    entries = [(graph, round(float(rng.uniform(0.5, 0.9)), 2)) for graph, _ in entries]  # ties on purpose
    child = synthetic_zoo(1, seed=100 + seed)[0][0]  # most likely in no candidate's bucket 9
    policy = SelectionPolicy(low_accuracy_margin=0.5)  # keep most of them: more for the bounds to prune
    selection = _select(child, entries, low_accuracy_margin=0.5)
    assert selection.parent_id == _brute_force(child, entries, policy)
    assert selection.candidates > 30
    assert selection.scored <= len({g.fingerprint for g, _ in entries})


def test_choosing_among_1000_resnet_sized_models_reads_each_structure_once() -> None:
    """Distinct structures (no sharing). The first choice reads the graphs it needs and keeps their
    features; the same choice again is answered from the cache, reading no more graphs than the few it
    matches exactly. (How fast: bench/warm_start.py; here, what makes it fast.)"""
    entries = synthetic_zoo(1000, seed=7)
    assert 60 < np.mean([len(g) for g, _ in entries]) and np.mean([g.param_count for g, _ in entries]) > 5e6
    candidates, graphs = _zoo(entries)
    child = resnet_graph()  # ResNet-18
    cache = FeatureCache()
    every = SelectionPolicy(low_accuracy_margin=1.0)  # no accuracy cut: all 1,000 are candidates
    read: list[list[int]] = []

    def load(ids: Iterable[int]) -> dict[int, ModelGraph]:
        read.append(sorted(ids))
        return {i: graphs[i] for i in read[-1]}

    first = select_parent(child, candidates, load, cache=cache, policy=every)
    cold = sum(len(ids) for ids in read)
    read.clear()
    again = select_parent(child, candidates, load, cache=cache, policy=every)
    warm = sum(len(ids) for ids in read)
    assert first.parent_id is not None and again.parent_id == first.parent_id and first.candidates == 1000
    assert math.isclose(first.similarity, again.similarity)
    assert cold == 1000 + 1, cold  # every structure's features once, then the chosen parent's graph
    assert warm == 1, warm  # the chosen parent's graph, for its weights; no features computed again
