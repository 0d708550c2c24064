"""Weight transfer: exact copies, Net2Net widening, pruning, kernels, identity layers for a deeper child."""

from __future__ import annotations

import torch
from torch import nn
from zoo_world import ResNet, cnn, mlp

from baobab.zoo import match_graphs, trace_graph, transform_weights

IMAGES = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(1))
ROWS = torch.randn(32, 10, generator=torch.Generator().manual_seed(2))


def _trained_like(module: nn.Module, inputs: torch.Tensor, seed: int = 0) -> nn.Module:
    """Random weights and batch-norm statistics that are not the defaults (as after training)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    module.train()
    for _ in range(3):
        module(inputs * 2 + 0.5)
    return module.eval()


def _transfer(parent: nn.Module, child: nn.Module, inputs: torch.Tensor, **kwargs: float) -> tuple[nn.Module, object]:
    parent_graph, child_graph = trace_graph(parent, inputs[:2]), trace_graph(child, inputs[:2])
    match = match_graphs(parent_graph, child_graph)
    state, report = transform_weights(parent.state_dict(), parent_graph, child, child_graph, match.mapping, **kwargs)
    child.load_state_dict(state, strict=True)
    return child.eval(), report


def _same(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> bool:
    return torch.allclose(a, b, atol=tol, rtol=0)


@torch.no_grad()
def test_an_identical_architecture_gets_the_exact_weights_and_the_same_outputs() -> None:
    parent = _trained_like(cnn(8, 2), IMAGES)
    child, report = _transfer(parent, cnn(8, 2), IMAGES)
    for key, value in parent.state_dict().items():
        assert torch.equal(child.state_dict()[key], value), key  # running statistics included
    assert torch.equal(child(IMAGES), parent(IMAGES))
    assert report.reshaped == [] and report.identity == [] and report.transferred_share == 1.0
    assert len(report.exact) == len(parent.state_dict())


@torch.no_grad()
def test_a_widened_network_computes_the_same_function_before_training() -> None:
    parent = _trained_like(cnn(8, 2), IMAGES)
    exact, report = _transfer(parent, cnn(13, 2), IMAGES, noise=0.0)
    assert _same(exact(IMAGES), parent(IMAGES))
    assert report.transferred_share == 1.0
    noisy, _ = _transfer(parent, cnn(13, 2), IMAGES)  # the default noise breaks the symmetry of the copies
    difference = (noisy(IMAGES) - parent(IMAGES)).abs().max()
    assert 0 < difference < 0.05 * parent(IMAGES).abs().max()
    # the new units are copies of the parent's, not the child's own initialisation
    conv = noisy.state_dict()["0.weight"]
    assert all(any(torch.allclose(conv[k], conv[j], atol=0.05) for j in range(8)) for k in range(8, 13))


@torch.no_grad()
def test_a_widened_mlp_and_resnet_compute_the_same_function() -> None:
    parent = _trained_like(mlp([16, 24]), ROWS)
    child, _ = _transfer(parent, mlp([40, 30]), ROWS, noise=0.0)
    assert _same(child(ROWS), parent(ROWS))
    images = torch.randn(4, 3, 16, 16)
    resnet = _trained_like(ResNet((1, 1), (4, 8)), images)
    wide, _ = _transfer(resnet, ResNet((1, 1), (6, 11)), images, noise=0.0)
    assert _same(wide(images), resnet(images), 1e-4)


@torch.no_grad()
def test_a_narrower_layer_keeps_the_units_of_largest_magnitude() -> None:
    parent = mlp([6])
    with torch.no_grad():
        scale = torch.tensor([1.0, -5.0, 0.1, 4.0, -3.0, 2.0])
        parent[0].weight.copy_(scale[:, None] * torch.linspace(1, 2, 10)[None, :])
    child, report = _transfer(parent, mlp([3]), ROWS)
    kept = [1, 3, 4]  # |-5|, |4|, |-3| times the same rows: the three largest
    assert torch.equal(child[0].weight, parent[0].weight[kept])
    assert torch.equal(child[0].bias, parent[0].bias[kept])
    assert torch.equal(child[2].weight, parent[2].weight[:, kept])  # the reader keeps the matching columns
    assert "0.weight" in report.reshaped


@torch.no_grad()
def test_kernels_are_cropped_from_the_centre_or_padded_around_it() -> None:
    parent = _trained_like(cnn(4, 1, kernel=5), IMAGES)
    small, _ = _transfer(parent, cnn(4, 1, kernel=3), IMAGES)
    assert torch.equal(small[0].weight, parent[0].weight[:, :, 1:4, 1:4])
    three = _trained_like(cnn(4, 1, kernel=3), IMAGES)
    large, _ = _transfer(three, cnn(4, 1, kernel=5), IMAGES)
    assert torch.equal(large[0].weight[:, :, 1:4, 1:4], three[0].weight)
    assert large[0].weight.abs().sum() == three[0].weight.abs().sum()  # zeros around it
    assert _same(large(IMAGES), three(IMAGES))  # with "same" padding the function is unchanged


@torch.no_grad()
def test_a_deeper_child_starts_its_new_layers_as_identity_and_computes_the_same_function() -> None:
    parent = _trained_like(mlp([32, 32]), ROWS)
    child, report = _transfer(parent, mlp([32, 32, 32, 32]), ROWS)
    assert _same(child(ROWS), parent(ROWS))
    assert len(report.identity) == 2
    for new in (child[4], child[6]):
        assert torch.equal(new.weight, torch.eye(32)) and torch.equal(new.bias, torch.zeros(32))
    assert torch.equal(child[0].weight, parent[0].weight) and torch.equal(child[2].weight, parent[2].weight)
    assert torch.equal(child[8].weight, parent[4].weight)


@torch.no_grad()
def test_a_deeper_cnn_starts_the_inserted_block_as_identity_and_keeps_what_matched() -> None:
    parent = _trained_like(cnn(8, 1, size=8), IMAGES[:, :, :8, :8])
    deeper = nn.Sequential(*list(cnn(8, 1, size=8))[:4])  # conv bn relu pool
    deeper.insert(3, nn.Conv2d(8, 8, 3, padding=1))  # an extra conv before the pooling
    deeper.insert(4, nn.BatchNorm2d(8))
    deeper.extend([nn.Flatten(), nn.Dropout(0.1), nn.Linear(8 * 4 * 4, 10)])
    child, report = _transfer(parent, deeper, IMAGES[:, :, :8, :8])
    assert set(report.identity) == {"_3", "_4"}
    centre = torch.zeros(8, 8, 3, 3)
    centre[range(8), range(8), 1, 1] = 1
    assert torch.equal(child[3].weight, centre)
    assert torch.equal(child[4].running_var, torch.ones(8)) and torch.equal(child[4].weight, torch.ones(8))
    assert torch.equal(child[0].weight, parent[0].weight) and torch.equal(child[1].running_mean, parent[1].running_mean)
    inputs = IMAGES[:, :, :8, :8]
    assert _same(child(inputs), parent(inputs), 1e-4)  # after a ReLU, a Dirac conv and a unit norm change nothing


@torch.no_grad()
def test_a_shallower_child_takes_the_parents_first_layers_and_drops_the_rest() -> None:
    parent = _trained_like(mlp([32, 32, 32]), ROWS)
    child, report = _transfer(parent, mlp([32]), ROWS)
    assert torch.equal(child[0].weight, parent[0].weight)
    assert torch.equal(child[2].weight, parent[6].weight)  # the classifier from the classifier
    assert report.identity == []


def test_the_transfer_does_not_touch_the_global_random_generator() -> None:
    parent, child = _trained_like(cnn(8, 1), IMAGES), cnn(12, 1)  # built first: building draws numbers
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    _, report = _transfer(parent, child, IMAGES)
    assert torch.equal(torch.rand(3), expected)
    assert report.reshaped  # it did replicate units, with noise
