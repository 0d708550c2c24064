"""Architecture graphs: tracing, the module-tree fallback, JSON and its checks, fingerprints."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from zoo_world import ResNet, cnn

from baobab.zoo import GraphFormatError, ModelGraph, trace_graph
from baobab.zoo._synthetic import resnet_graph


class _Branchy(nn.Module):
    """Data-dependent control flow: torch.fx cannot trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            x = torch.relu(self.a(x))
        return self.b(x)


def test_a_cnn_is_one_node_per_operation_with_shapes_and_its_state_names() -> None:
    graph = trace_graph(cnn(8, 2), torch.zeros(2, 1, 28, 28))
    assert graph.traced and graph.note is None
    assert [n.op for n in graph.nodes] == [
        "conv2d", "batchnorm2d", "relu", "maxpool2d", "conv2d", "batchnorm2d", "relu", "maxpool2d",
        "flatten", "dropout", "linear",
    ]  # fmt: skip
    conv, bn = graph.nodes[4], graph.nodes[5]
    assert (conv.weight, conv.bias, conv.out_shape) == ((16, 8, 3, 3), (16,), (16, 14, 14))
    assert dict(conv.state) == {"weight": "4.weight", "bias": "4.bias"}
    assert set(bn.state) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    assert [n.inputs for n in graph.nodes] == [(), *[(i,) for i in range(10)]]
    assert (graph.input_shape, graph.output_shape, graph.io_signature) == ((1, 28, 28), (10,), "1x28x28->10")
    assert graph.param_count == sum(p.numel() for p in cnn(8, 2).parameters())
    assert graph.weighted == [0, 1, 4, 5, 10]


def test_a_residual_block_has_the_add_read_both_branches() -> None:
    graph = trace_graph(ResNet((1, 1), (4, 8)), torch.zeros(2, 3, 16, 16))
    adds = [n for n in graph.nodes if n.op == "add"]
    assert len(adds) == 2
    for add in adds:
        assert len(add.inputs) == 2
        assert {graph.nodes[i].op for i in add.inputs} <= {"batchnorm2d", "identity"}
    # the shortcut reads the block's input, not the branch: a fork in the data flow
    succ = graph.successors()
    assert any(len(s) == 2 for s in succ)


def test_the_synthetic_resnet_graph_is_what_tracing_reads() -> None:
    for blocks, widths in [((1, 2), (4, 8)), ((2, 1, 1), (8, 16, 24))]:
        traced = trace_graph(ResNet(blocks, widths), torch.zeros(2, 3, 32, 32))
        built = resnet_graph(blocks, widths)
        assert built.fingerprint == traced.fingerprint
        assert [dict(n.state) for n in built.nodes] == [dict(n.state) for n in traced.nodes]


def test_tracing_leaves_batch_norm_statistics_and_the_training_mode_alone() -> None:
    module = cnn(4, 1).train()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    trace_graph(module, torch.randn(4, 1, 28, 28) * 5)
    assert module.training
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


def test_an_untraceable_model_falls_back_to_its_module_tree_and_says_why() -> None:
    graph = trace_graph(_Branchy(), torch.ones(2, 4))
    assert not graph.traced
    assert "torch.fx cannot trace it" in (graph.note or "")
    assert [(n.name, n.op, n.weight) for n in graph.nodes] == [("a", "linear", (4, 4)), ("b", "linear", (2, 4))]
    assert graph.nodes[1].inputs == (0,)


def test_an_input_the_module_cannot_take_falls_back_too() -> None:
    graph = trace_graph(cnn(4, 1), torch.zeros(2, 3, 28, 28))  # three channels for a one-channel network
    assert not graph.traced
    assert "does not run through the traced graph" in (graph.note or "")


def test_json_round_trips_and_the_fingerprint_ignores_names() -> None:
    graph = trace_graph(cnn(8, 2), torch.zeros(2, 1, 28, 28))
    again = ModelGraph.loads(graph.dumps())
    assert again == graph
    renamed = ModelGraph.from_json(
        {**graph.to_json(), "nodes": [{**n, "name": f"x{i}"} for i, n in enumerate(graph.to_json()["nodes"])]}
    )
    assert renamed.fingerprint == graph.fingerprint
    wider = trace_graph(cnn(9, 2), torch.zeros(2, 1, 28, 28))
    assert wider.fingerprint != graph.fingerprint


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda g: g.update(version=7), "graph.version", "format version 7"),
        (lambda g: g.update(nodes={}), "graph.nodes", "must be an array"),
        (lambda g: g["nodes"][2].update(inputs=[2]), "graph.nodes[2].inputs", "earlier nodes"),
        (lambda g: g["nodes"][0].update(weight=[8, -1]), "graph.nodes[0].weight", "whole numbers"),
        (lambda g: g["nodes"][0].update(op=""), "graph.nodes[0].op", "non-empty string"),
        (lambda g: g["nodes"][1].update(state={"weight": 3}), "graph.nodes[1].state", "state-dict key"),
        (lambda g: g.update(traced="yes"), "graph.traced", "true or false"),
    ],
)
def test_a_bad_graph_is_refused_naming_the_field(
    change: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    data = json.loads(trace_graph(cnn(4, 1), torch.zeros(2, 1, 28, 28)).dumps())
    change(data)
    with pytest.raises(GraphFormatError, match=message) as caught:
        ModelGraph.from_json(data)
    assert caught.value.field == field
