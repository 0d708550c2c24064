"""Warm starting TorchModel trials from the zoo, as a worker does, and from the SDK over HTTP.

The worker's calls are made here the way the trial runner makes them (a trial row, the
template trained inside a trial context whose ``warm_starter`` is
:func:`baobab.zoo.make_warm_starter`, the parameters stored, the trial finished, then
:func:`baobab.zoo.register_trial_model`), on a real database and artifact store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flask import Flask
from sqlalchemy import select
from torch import nn
from zoo_world import World, cnn

from baobab.model import FixedKnob, IntegerKnob, InterimMetric, TorchModel, TrialContext, trial_context
from baobab.sdk import Client
from baobab.store import Trial, ZooModel, issue_trial_token, session_scope
from baobab.zoo import (
    DbZoo,
    TrialHttpZoo,
    make_warm_starter,
    model_graph,
    register_model,
    register_trial_model,
    trace_graph,
    warm_start,
)
from baobab.zoo._warm_start import DEFAULT_LR_DAMPING

TASK = "IMAGE_CLASSIFICATION"


class TinyCnn(TorchModel):
    """TorchCnn's network on 8×8 images, two classes."""

    @staticmethod
    def get_knob_config() -> dict[str, Any]:
        return {"channels": IntegerKnob(2, 16), "depth": IntegerKnob(1, 2), "epochs": FixedKnob(4)}

    def build_module(self, downscale: bool) -> nn.Module:
        return cnn(self.knobs["channels"], self.knobs["depth"], size=8, classes=self.output_size)

    def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
        data = np.load(dataset_path)
        return data["x"], data["y"]


class _Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = cnn(4, 1, size=8, classes=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) if x.mean() > -100 else -self.body(x)  # data-dependent: torch.fx cannot trace it


class Untraceable(TinyCnn):
    def build_module(self, downscale: bool) -> nn.Module:
        return _Gated()


class _LearningRates:
    """A sink that notes the optimizer's learning rate at each report."""

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | None = None
        self.rates: list[float] = []

    def on_report(self, metric: InterimMetric) -> bool:
        assert self.optimizer is not None
        self.rates.append(self.optimizer.param_groups[0]["lr"])
        return False

    def on_log(self, message: str) -> None:
        pass


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """256 images of 8×8: class 1 brighter in the top half."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 256)
    x = rng.normal(0, 1, (256, 1, 8, 8)).astype(np.float32)
    x[y == 1, :, :4] += 1.0
    path = tmp_path_factory.mktemp("data") / "data.npz"
    np.savez(path, x=x, y=y)
    return str(path)


def _run(
    world: World,
    zoo: Any,
    sub_job: int,
    template: type[TorchModel],
    dataset: str,
    *,
    warm_start: bool = True,
    **knobs: Any,
) -> tuple[int, TrialContext, TorchModel]:
    """One trial as the runner runs it, with the zoo (or a zoo per trial id); its id, context and trained model.

    ``warm_start``: the job's option; the runner gives the trial no warm starter when it is false.
    """
    trial = world.trial(sub_job)
    if callable(zoo):
        zoo = zoo(trial)
    model = template(**{"channels": 4, "depth": 2, "epochs": 4, **knobs})
    starter = make_warm_starter(zoo, trial_id=trial, seed=trial) if warm_start else None  # the job's task
    context = TrialContext(warm_starter=starter)
    with trial_context(context):
        model.train(dataset)
        score = model.evaluate(dataset)
        graph = model_graph(model)
    world.finish(trial, score, model.dump_parameters())
    register_trial_model(zoo, trial, graph)
    return trial, context, model


def zoo_models(world: World) -> list[ZooModel]:
    with session_scope(world.engine) as session:
        return list(session.scalars(select(ZooModel).order_by(ZooModel.id)))


def _parent_of(world: World, trial: int) -> tuple[int | None, float | None]:
    with session_scope(world.engine) as session:
        row = session.get(Trial, trial)
        assert row is not None
        return row.parent_zoo_model_id, row.similarity


def test_a_second_job_warm_starts_from_the_first_ones_models(world: World, dataset: str) -> None:
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    first, first_context, _ = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4)
    assert any("no warm start: no zoo model" in line for line in first_context.logs)
    assert _parent_of(world, first) == (None, None)
    [first_zoo_id] = [m.id for m in zoo_models(world)]

    sink = _LearningRates()

    class Watched(TinyCnn):
        def make_optimizer(self, params: Iterator[nn.Parameter]) -> torch.optim.Optimizer:
            sink.optimizer = super().make_optimizer(params)
            return sink.optimizer

    second = world.trial(world.job(owner))
    model = Watched(channels=6, depth=2, epochs=4)
    context = TrialContext(sink=sink, warm_starter=make_warm_starter(zoo, task=TASK, trial_id=second))
    with trial_context(context):
        model.train(dataset)
    parent, similarity = _parent_of(world, second)
    assert parent == first_zoo_id and similarity is not None and 0.5 < similarity < 1
    line = next(line for line in context.logs if line.startswith("warm start from zoo model"))
    assert f"zoo model {first_zoo_id} (similarity {similarity:.2f}" in line
    scale = model._lr_scale
    assert scale == pytest.approx(1 - DEFAULT_LR_DAMPING)  # everything came from the parent: the gentlest start
    assert sink.rates == pytest.approx([1e-3 * scale, 1e-3, 1e-3, 1e-3])  # the first quarter of four epochs


def test_an_identical_architecture_starts_from_the_parents_exact_function(world: World, dataset: str) -> None:
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    _, _, parent = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=5)
    starter = make_warm_starter(zoo, task=TASK, trial_id=world.trial(world.job(owner)))
    child = cnn(5, 2, size=8, classes=2)
    result = starter(child, parent.example_input)
    assert result is not None and result.similarity == 1.0 and result.transferred_share == 1.0
    child.load_state_dict(result.state)
    inputs = torch.from_numpy(np.load(dataset)["x"][:32])
    assert parent.module is not None
    assert torch.equal(child.eval()(inputs), parent.module.eval()(inputs))


def test_a_model_that_cannot_be_traced_trains_cold_and_is_never_a_parent(world: World, dataset: str) -> None:
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4, depth=1)
    trial, context, model = _run(world, zoo, world.job(owner), Untraceable, dataset)
    assert any("no warm start: torch.fx cannot trace it" in line for line in context.logs)
    assert _parent_of(world, trial) == (None, None)
    assert model.evaluate(dataset) > 0.5  # it trained
    untraced = [m for m in zoo_models(world) if not m.traced]
    assert len(untraced) == 1  # kept in the zoo...
    later, _, _ = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4, depth=1)
    assert _parent_of(world, later)[0] != untraced[0].id  # ...but never a parent


def test_a_trial_without_a_warm_starter_trains_from_scratch(world: World, dataset: str) -> None:
    """The job option ``warm_start: false``: the runner gives its trials no warm starter."""
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4)
    trial, context, model = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4, warm_start=False)
    assert _parent_of(world, trial) == (None, None)
    assert not any("warm start" in line for line in context.logs)
    assert model.train_args == {}  # the option is the platform's: train() never sees it


def test_a_failing_zoo_means_a_cold_start_never_a_failed_trial(world: World, dataset: str) -> None:
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4)
    for key in world.artifacts.fs.find(f"{world.artifacts.url}/params"):
        world.artifacts.fs.rm(key)  # the parent's parameters are gone
    trial, context, model = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=4)
    assert any(line.startswith("no warm start: the zoo failed: ArtifactNotFoundError") for line in context.logs)
    assert _parent_of(world, trial) == (None, None) and model.module is not None


def test_the_sdk_registers_any_module_and_warm_starts_another_for_the_same_user_only(
    served: str, tmp_path: Path
) -> None:
    root = Client(served)
    root.login("root@example.com", "root-password")
    for name in ("ann", "ben"):
        root.create_user(f"{name}@example.com", "password-123", role="APP_DEVELOPER")
    ann, ben = Client(served), Client(served)
    ann.login("ann@example.com", "password-123")
    ben.login("ben@example.com", "password-123")
    example = torch.randn(4, 1, 28, 28)
    trained = cnn(8, 2).eval()
    registered = register_model(ann, trained, example, score=0.9, task=TASK, name="mine")
    assert (registered["name"], registered["access"], registered["score"]) == ("mine", "PRIVATE", 0.9)
    assert [m["id"] for m in ann.list_zoo_models()] == [registered["id"]]

    same = cnn(8, 2).eval()
    answer = warm_start(ann, same, example, task=TASK)
    assert (answer["zoo_model_id"], answer["similarity"], answer["transferred_share"]) == (registered["id"], 1.0, 1.0)
    assert torch.equal(same(example), trained(example))
    wider = cnn(12, 2).eval()
    assert warm_start(ann, wider, example, task=TASK)["similarity"] < 1
    assert torch.allclose(wider(example), trained(example), atol=0.05 * trained(example).abs().max().item())

    untouched = cnn(8, 2)
    before = {k: v.clone() for k, v in untouched.state_dict().items()}
    cold = warm_start(ben, untouched, example, task=TASK)
    assert cold["zoo_model_id"] is None and "no zoo model" in cold["reason"]
    assert all(torch.equal(before[k], v) for k, v in untouched.state_dict().items())
    assert ann.get_zoo_model(registered["id"])["times_chosen"] == 2


def test_a_cluster_worker_goes_through_the_api_with_its_trial_token(
    served: str, app: Flask, world: World, dataset: str
) -> None:
    admin = Client(served)
    admin.login("root@example.com", "root-password")
    owner = admin.create_user("ann@example.com", "password-123", role="MODEL_DEVELOPER")["id"]
    secret = app.extensions["baobab"].settings.signing_key()

    def worker_zoo(trial_id: int) -> TrialHttpZoo:  # what the executor hands a cluster worker: URL and token
        return TrialHttpZoo(served, issue_trial_token(secret, trial_id))

    first, _, _ = _run(world, worker_zoo, world.job(owner), TinyCnn, dataset, channels=4)
    second, context, _ = _run(world, worker_zoo, world.job(owner), TinyCnn, dataset, channels=6)
    [zoo_model, _] = sorted(admin.list_zoo_models(), key=lambda m: m["id"])
    assert zoo_model["trial_id"] == first
    shown = admin.get_trial(second)
    assert shown["parent_zoo_model_id"] == zoo_model["id"] and 0 < shown["similarity"] < 1
    assert admin.get_trial(first)["parent_zoo_model_id"] is None
    assert any(line.startswith("warm start from zoo model") for line in context.logs)


def test_trace_of_the_template_matches_its_registered_graph(world: World, dataset: str) -> None:
    owner = world.user()
    zoo = DbZoo(world.engine, world.artifacts)
    _, _, model = _run(world, zoo, world.job(owner), TinyCnn, dataset, channels=3, depth=1)
    [row] = zoo_models(world)
    assert model.module is not None and model.example_input is not None
    assert row.fingerprint == trace_graph(model.module, model.example_input).fingerprint
    assert row.io_signature == "1x8x8->2"
