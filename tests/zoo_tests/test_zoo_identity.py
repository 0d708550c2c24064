"""Instances of one model space match by identity: the same module at the same place pairs with
itself and is copied exactly; other graphs, and instances of two spaces, match by shapes as before."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from zoo_world import World

from baobab.model import FixedKnob, TrialContext, trial_context
from baobab.space import InputMutator, Instance, ModelSpace, OperatorMutator, SpaceModel, keep, space_key
from baobab.zoo import (
    DbZoo,
    GraphFormatError,
    ModelGraph,
    WarmStartResult,
    make_warm_starter,
    match_graphs,
    model_graph,
    register_trial_model,
    trace_graph,
    transform_weights,
)

IMAGES = torch.zeros(2, 1, 8, 8)


class Net(nn.Module):
    """A stem and two convolutions of one width, then a classifier on the mean of each channel."""

    def __init__(self, classes: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        h = torch.relu(self.conv1(h))
        h = torch.relu(self.conv2(h))
        return self.head(h.mean((2, 3)))


def kernels() -> OperatorMutator:
    return OperatorMutator("op", "conv?", {"conv3": keep, "conv5": lambda _: nn.Conv2d(8, 8, 5, padding=2)})


#: op_conv1, op_conv2: a 3x3 or a 5x5 convolution; skip_conv2: conv2 reads conv1 (relu_1) or the stem (relu).
SPACE = ModelSpace(Net, [kernels(), InputMutator("skip", "conv2", ["relu_1", "relu"])])


def instance(seed: int, **choices: str) -> Instance:
    torch.manual_seed(seed)
    return SPACE.instantiate(choices)


def graph(of: Instance, space: ModelSpace | None = SPACE) -> ModelGraph:
    return trace_graph(of.module, IMAGES, space=None if space is None else space_key(space))


def owners(g: ModelGraph) -> dict[str, int]:
    """Module path → the node that owns its weight."""
    return {key.rpartition(".")[0]: j for j, node in enumerate(g.nodes) if (key := node.state.get("weight"))}


def shared_state(child: Instance, parent: Instance) -> list[str]:
    """The state entries of the modules both records say are the same."""
    shared = child.record.shared_modules(parent.record)
    return [key for key in child.module.state_dict() if key.rpartition(".")[0] in shared]


def test_every_unchanged_node_pairs_by_identity_and_is_copied_exactly() -> None:
    parent, child = instance(0), instance(1, op_conv1="conv5")
    parent_graph, child_graph = graph(parent), graph(child)
    match = match_graphs(parent_graph, child_graph)

    same = {name for name, key in child.record.operators.items() if parent.record.operators.get(name) == key}
    unchanged = {j for j, node in enumerate(child_graph.nodes) if node.name in same}  # no renaming in this space
    assert unchanged and match.by_identity == unchanged
    assert all(child_graph.nodes[j].name == parent_graph.nodes[match.mapping[j]].name for j in unchanged)
    conv1 = owners(child_graph)["conv1"]
    assert conv1 not in match.by_identity and match.mapping[conv1] == owners(parent_graph)["conv1"]  # by shapes

    state, report = transform_weights(
        parent.module.state_dict(), parent_graph, child.module, child_graph, match.mapping
    )
    copied = shared_state(child, parent)
    assert {key.rpartition(".")[0] for key in copied} == {"stem", "conv2", "head"}
    for key in copied:
        assert torch.equal(state[key], parent.module.state_dict()[key]), key
    assert set(copied) <= set(report.exact)
    assert torch.equal(state["conv1.weight"][:, :, 1:4, 1:4], parent.module.conv1.weight)  # 3x3 in the 5x5's centre


def test_identity_pairs_the_layer_the_child_kept_where_shapes_alone_pair_the_first() -> None:
    """The child skips conv1: its conv2 is the parent's conv2, as the records say, not the first 8-channel conv."""
    parent, child = instance(0), instance(1, skip_conv2="relu")
    parent_graph, child_graph = graph(parent), graph(child)
    assert "conv1" not in owners(child_graph)
    conv2, parent_of = owners(child_graph)["conv2"], owners(parent_graph)

    by_identity = match_graphs(parent_graph, child_graph)
    assert by_identity.mapping[conv2] == parent_of["conv2"]
    assert len(by_identity.by_identity) == len(child_graph)
    state, _ = transform_weights(
        parent.module.state_dict(), parent_graph, child.module, child_graph, by_identity.mapping
    )
    for key in shared_state(child, parent):
        assert torch.equal(state[key], parent.module.state_dict()[key]), key

    plain_parent, plain_child = replace(parent_graph, space=None), replace(child_graph, space=None)
    by_shapes = match_graphs(plain_parent, plain_child)
    assert by_shapes.mapping[conv2] == parent_of["conv1"] and not by_shapes.by_identity
    assert by_shapes.similarity == by_identity.similarity  # the choice of a parent does not move


def test_instances_of_two_spaces_match_by_shapes_only() -> None:
    """Same base, same modules, equal node identities: still two spaces, so no pairing by identity."""
    other = ModelSpace(Net, [kernels()])
    assert space_key(other) != space_key(SPACE)
    parent, child = instance(0), instance(1, skip_conv2="relu")
    parent_graph, child_graph = graph(parent), graph(child, other)
    assert {n.identity for n in child_graph.nodes} <= {n.identity for n in parent_graph.nodes}
    match = match_graphs(parent_graph, child_graph)
    assert not match.by_identity
    assert match.mapping == match_graphs(replace(parent_graph, space=None), child_graph).mapping


def test_identities_travel_in_json_and_graphs_without_them_load_as_before() -> None:
    searched = graph(instance(0))
    assert searched.space == space_key(SPACE) and all(n.identity for n in searched.nodes)
    assert ModelGraph.loads(searched.dumps()) == searched
    assert ModelGraph.loads(searched.dumps(), trusted=True) == searched

    plain = graph(instance(0), space=None)
    data = plain.to_json()
    assert "space" not in data and all("identity" not in n for n in data["nodes"])  # as graphs were written before
    assert ModelGraph.loads(plain.dumps(), trusted=True) == plain
    assert plain.fingerprint == searched.fingerprint  # similarity caches are shared

    bad = json.loads(searched.dumps())
    bad["nodes"][1]["identity"] = 7
    with pytest.raises(GraphFormatError, match="non-empty string") as caught:
        ModelGraph.from_json(bad)
    assert caught.value.field == "graph.nodes[1].identity"


class Cells(SpaceModel):
    @classmethod
    def space(cls) -> ModelSpace:
        return ModelSpace(Net, [kernels(), InputMutator("skip", "conv2", ["relu_1", "relu"])])

    @staticmethod
    def training_knobs() -> dict[str, Any]:
        return {"epochs": FixedKnob(2)}

    def base_args(self) -> dict[str, Any]:
        return {"classes": self.output_size}

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        data = np.load(dataset_path)
        return data["x"], data["y"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 128)
    x = rng.normal(0, 1, (128, 1, 8, 8)).astype(np.float32)
    x[y == 1, :, :4] += 1.0
    path = tmp_path_factory.mktemp("data") / "data.npz"
    np.savez(path, x=x, y=y)
    return str(path)


def test_a_space_model_trial_starts_from_a_zoo_parent_of_its_space_by_identity(world: World, dataset: str) -> None:
    """As the runner does it: the parent's graph registered by model_graph, the child warm-started with its model."""
    zoo = DbZoo(world.engine, world.artifacts)
    job = world.job(world.user())
    parent_trial = world.trial(job)
    parent = Cells(**Cells.model_space().defaults(), epochs=2)
    with trial_context(TrialContext()):
        parent.train(dataset)
        score = parent.evaluate(dataset)
        parent_graph = model_graph(parent)
    assert parent_graph is not None and parent_graph.space == space_key(Cells.model_space())
    world.finish(parent_trial, score, parent.dump_parameters())
    assert register_trial_model(zoo, parent_trial, parent_graph) is not None

    child = Cells(**{**Cells.model_space().defaults(), "skip_conv2": "relu"}, epochs=2)
    starter = make_warm_starter(zoo, trial_id=world.trial(job), model=child)
    results: list[WarmStartResult | None] = []

    def watched(module: nn.Module, example: torch.Tensor) -> WarmStartResult | None:
        results.append(starter(module, example))
        return results[-1]

    context = TrialContext(warm_starter=watched)
    with trial_context(context):
        child.train(dataset)
    [result] = results
    assert result is not None and result.graph.space == parent_graph.space
    assert parent.module is not None and child.record is not None and parent.record is not None
    shared = child.record.shared_modules(parent.record)
    assert shared == {"stem", "conv2", "head"}
    parent_state = parent.module.state_dict()
    for key, value in result.state.items():
        if key.rpartition(".")[0] in shared:
            assert torch.equal(value, parent_state[key]), key
    assert any(line.startswith("warm start from zoo model") for line in context.logs)
