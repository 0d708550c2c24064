"""Matching: similarity 1 for an identical architecture, the mapping of wider, deeper and shallower children."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from zoo_world import ResNet, cnn, mlp

from baobab.zoo import ModelGraph, match_graphs, similarities, trace_graph
from baobab.zoo._matching import features, upper_bounds
from baobab.zoo._synthetic import resnet_graph, synthetic_zoo

IMAGE = torch.zeros(2, 1, 28, 28)
ROW = torch.zeros(2, 10)


def _cnn(channels: int, depth: int, kernel: int = 3) -> ModelGraph:
    return trace_graph(cnn(channels, depth, kernel=kernel), IMAGE)


def _mlp(*widths: int) -> ModelGraph:
    return trace_graph(mlp(widths), ROW)


def test_an_identical_architecture_scores_exactly_one_and_maps_node_to_node() -> None:
    for graph in (_cnn(16, 2), _mlp(32, 32), resnet_graph()):
        match = match_graphs(graph, graph)
        assert match.similarity == 1.0
        assert match.mapping == {i: i for i in range(len(graph))}
        assert match.matched_share == 1.0


def test_a_branching_graph_is_not_overcounted() -> None:
    """Identical ResNets score 1 exactly; removing one residual block lowers it, never above 1."""
    full = resnet_graph((2, 2, 2, 2), (16, 32, 64, 128))
    assert match_graphs(full, full).similarity == 1.0
    shorter = resnet_graph((2, 2, 1, 2), (16, 32, 64, 128))
    down, up = match_graphs(full, shorter).similarity, match_graphs(shorter, full).similarity
    assert 0.8 < down < 1.0 and 0.8 < up < 1.0


def test_other_widths_match_every_node_with_a_lower_score_the_further_they_are() -> None:
    base = _cnn(16, 2)
    scores = {c: match_graphs(_cnn(c, 2), base) for c in (8, 12, 16, 24, 32)}
    for match in scores.values():
        assert match.mapping == {i: i for i in range(len(base))}
    sims = {c: m.similarity for c, m in scores.items()}
    assert sims[16] == 1.0
    assert sims[8] < sims[12] < 1.0 and sims[32] < sims[24] < 1.0


def test_a_deeper_child_keeps_the_first_and_last_layers_and_leaves_the_new_block_unmatched() -> None:
    parent, child = _mlp(32, 32), _mlp(32, 32, 32)  # child: L0 R1 L2 R3 [L4 R5] L6
    match = match_graphs(parent, child)
    assert match.mapping == {0: 0, 1: 1, 2: 2, 3: 3, 6: 4}
    assert match.matched_share == 3 / 4
    conv_parent, conv_child = _cnn(16, 2), _cnn(16, 3)
    mapping = match_graphs(conv_parent, conv_child).mapping
    weighted_child = [j for j in conv_child.weighted if j in mapping]
    assert [(conv_child.nodes[j].name, conv_parent.nodes[mapping[j]].name) for j in weighted_child] == [
        ("_0", "_0"), ("_1", "_1"), ("_4", "_4"), ("_5", "_5"), ("_14", "_10"),
    ]  # fmt: skip


def test_a_shallower_child_maps_onto_the_parents_first_layers_and_its_classifier() -> None:
    parent, child = _cnn(16, 3), _cnn(16, 1)
    match = match_graphs(parent, child)
    names = {child.nodes[j].name: parent.nodes[i].name for j, i in match.mapping.items() if child.nodes[j].weight}
    assert names == {"_0": "_0", "_1": "_1", "_6": "_14"}
    assert match.matched_share == 1.0
    assert match_graphs(_mlp(32, 32), _mlp(32)).mapping == {0: 0, 1: 1, 2: 4}


def test_nodes_of_another_type_or_rank_are_never_matched() -> None:
    conv = _cnn(8, 1)
    dense = _mlp(8)
    match = match_graphs(conv, dense)
    for child, parent in match.mapping.items():
        assert dense.nodes[child].key == conv.nodes[parent].key
    assert not any(dense.nodes[j].op == "linear" and conv.nodes[i].op != "linear" for j, i in match.mapping.items())


def test_the_batched_programme_agrees_with_the_pairwise_one_and_the_bounds_hold() -> None:
    graphs = [g for g, _ in synthetic_zoo(12, seed=3)] + [_cnn(8, 2), _mlp(16)]
    feats = [features(g) for g in graphs]
    for child, child_features in zip(graphs[:6], feats[:6], strict=True):
        batched = similarities(child_features, feats)
        pairwise = np.array([match_graphs(parent, child).similarity for parent in graphs])
        np.testing.assert_allclose(batched, pairwise, rtol=0, atol=1e-12)
        assert np.all(upper_bounds(child_features, feats) >= batched - 1e-12)
        assert np.all((batched >= 0) & (batched <= 1))


def test_the_resnet_family_ranks_closer_architectures_higher() -> None:
    child = trace_graph(ResNet((2, 2, 2, 2), (32, 64, 128, 256)), torch.zeros(2, 3, 32, 32))
    parents = {
        "same": resnet_graph((2, 2, 2, 2), (32, 64, 128, 256)),
        "wider": resnet_graph((2, 2, 2, 2), (48, 96, 192, 384)),
        "deeper": resnet_graph((3, 4, 6, 3), (32, 64, 128, 256)),
        "much wider and deeper": resnet_graph((3, 4, 6, 3), (96, 192, 384, 768)),
    }
    sims = {name: match_graphs(parent, child).similarity for name, parent in parents.items()}
    assert sims["same"] == 1.0
    assert sims["same"] > sims["wider"] > sims["much wider and deeper"]
    assert sims["same"] > sims["deeper"] > sims["much wider and deeper"]
    for a, b in itertools.combinations(parents.values(), 2):
        assert match_graphs(a, b).similarity < 1.0
