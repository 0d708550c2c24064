"""SpaceModel: a template searching its space trains, reloads, refuses misfits before
training, and inherits exactly the shared modules from its parent trial."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from baobab.exceptions import InvalidArchitectureError
from baobab.model import FixedKnob, PolicyKnob, TrialContext, check_template, trial_context
from baobab.space import InputMutator, ModelSpace, OperatorMutator, SpaceModel, keep
from baobab.store import params_from_bytes, params_to_bytes


class Mlp(nn.Module):
    def __init__(self, features: int = 4, classes: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, 16)
        self.fc2 = nn.Linear(16, 16)
        self.out = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.out(torch.relu(self.fc2(h)))


class Searched(SpaceModel):
    @classmethod
    def space(cls) -> ModelSpace:
        return ModelSpace(
            Mlp,
            [
                OperatorMutator("act", "relu*", {"relu": None, "tanh": lambda _: nn.Tanh()}),
                OperatorMutator(
                    "deep", "fc2", {"same": keep, "deeper": lambda m: nn.Sequential(m, nn.ReLU(), nn.Linear(16, 16))}
                ),
                InputMutator("skip", "out", ["relu_1", "relu", "x"]),
            ],
        )

    @staticmethod
    def training_knobs():
        return {"epochs": FixedKnob(3), "learning_rate": FixedKnob(0.05), "skip_train": PolicyKnob("SKIP_TRAIN")}

    def base_args(self):
        return {"features": self.input_shape[0], "classes": self.output_size}

    def load_data(self, dataset_path):
        with np.load(dataset_path) as data:
            return data["x"], data["y"]


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 150)
    x = (np.eye(3, 5, dtype=np.float32)[y] * 3 + rng.normal(0, 0.5, (150, 5))).astype(np.float32)
    path = tmp_path_factory.mktemp("blobs") / "blobs.npz"
    np.savez(path, x=x, y=y.astype(np.int64))
    return path


class Sharing(Searched):
    """Searched with SHARE_PARAMS declared (on in its trials): its parameters carry the whole super-network."""

    @staticmethod
    def training_knobs():
        return {**Searched.training_knobs(), "share_params": PolicyKnob("SHARE_PARAMS")}


def train(
    path: Path, shared: dict | None = None, template: type[Searched] = Searched, **choices: object
) -> tuple[Searched, TrialContext]:
    knobs = {**template.model_space().defaults(), "epochs": 3, "learning_rate": 0.05, "skip_train": False, **choices}
    if template is not Searched:
        knobs.setdefault("share_params", True)
    model = template(**knobs)
    context = TrialContext()
    with trial_context(context):
        model.train(str(path), shared)
    return model, context


def test_knobs_are_the_decisions_plus_the_training_knobs() -> None:
    config = check_template(Searched)
    assert set(config) == {"act_relu", "act_relu_1", "deep_fc2", "skip_out", "epochs", "learning_rate", "skip_train"}


def test_an_instance_trains_and_reloads_from_its_parameters(blobs: Path) -> None:
    model, _ = train(blobs, deep_fc2="deeper", act_relu="tanh")
    assert model.evaluate(str(blobs)) > 0.8
    params = params_from_bytes(params_to_bytes(model.dump_parameters()))
    fresh = Searched(**model.knobs)
    fresh.load_parameters(params)
    queries = np.load(blobs)["x"][:5].tolist()
    assert fresh.predict(queries) == model.predict(queries)


def test_a_misfit_is_refused_before_any_training(blobs: Path) -> None:
    """Feeding the raw features to `out` does not fit (5 features, 16 expected): found on two inputs, before
    any epoch, and named."""
    with pytest.raises(
        InvalidArchitectureError,
        match=r"^node 'out' does not fit its inputs \(after 'skip' changed node 'out'\): RuntimeError: "
        r"mat1 and mat2 shapes cannot be multiplied \(2x5 and 16x3\)$",
    ):
        train(blobs, skip_out="x")


def test_inheritance_copies_exactly_the_modules_the_records_share(blobs: Path) -> None:
    parent, _ = train(blobs, act_relu="tanh")
    shared = params_from_bytes(params_to_bytes(parent.dump_parameters()))
    child, context = train(blobs, shared, deep_fc2="deeper", skip_train=True)
    state, source = child.module.state_dict(), parent.module.state_dict()
    same = {k for k in state if k in source and torch.equal(state[k], source[k])}
    # The activation is a function node (no weights); fc2 became a deeper block; fc1 and out are the same operators.
    assert same == {"fc1.weight", "fc1.bias", "out.weight", "out.bias"}
    assert context.logs[-1] == (
        "inherited 4 of 8 tensors by mutation record (2 modules the same as the parent trial's); "
        "the super-network keeps 2 tensors of other candidates"
    )  # the parent's fc2 stays in the super-network


def test_the_super_network_keeps_every_candidate_trained_once(blobs: Path) -> None:
    """a -> b -> a at fc2: the third trial starts from the first one's fc2, which the second did not use."""
    first, _ = train(blobs)
    second, _ = train(blobs, params(first), deep_fc2="deeper")
    third, context = train(blobs, params(second), skip_train=True)
    assert torch.equal(third.module.fc2.weight, first.module.fc2.weight)
    assert not torch.equal(third.module.fc1.weight, first.module.fc1.weight)  # fc1 came from the second, trained on
    assert torch.equal(third.module.fc1.weight, second.module.fc1.weight)
    assert "inherited 6 of 6 tensors" in context.logs[-1]
    assert any(key.startswith("supernet.") for key in params(third))  # the deeper fc2 is handed on in turn


def params(model: Searched) -> dict:
    return params_from_bytes(params_to_bytes(model.dump_parameters()))


def test_concurrent_trainings_on_the_super_network_both_add_up(blobs: Path) -> None:
    """Two trainings of different architectures start from one trial's super-network at once; adding the second's
    update onto the first's result (what the driver does) keeps both updates of a candidate both trained, and the
    candidate only the first trained, which the second never held."""
    from baobab.advisor.driver._shared_weights import add_update

    start = params(train(blobs, template=Sharing)[0])
    first = params(train(blobs, start, Sharing, deep_fc2="deeper")[0])
    second = params(train(blobs, start, Sharing, act_relu="tanh")[0])
    merged = add_update(first, start, second)
    supernet = {key for key in start if key.startswith("supernet.")}
    # The start trial's own candidates are in its super-network, under the names every other trial uses.
    assert supernet and supernet < {key for key in first if key.startswith("supernet.")}
    fc1 = next(key for key in supernet if start[key].shape == (16, 5))
    assert not np.array_equal(first[fc1], start[fc1]) and not np.array_equal(second[fc1], start[fc1])
    np.testing.assert_allclose(
        merged[fc1], start[fc1] + (first[fc1] - start[fc1]) + (second[fc1] - start[fc1]), atol=1e-6
    )
    deeper = {key for key in first if key.startswith("supernet.")} - set(second)
    assert deeper and all(np.array_equal(merged[key], first[key]) for key in deeper)
    # A trial handed the merged weights starts from them.
    child, _ = train(blobs, merged, Sharing, skip_train=True)
    np.testing.assert_allclose(child.module.fc1.weight.detach().numpy(), merged[fc1])


class NormedMlp(Mlp):
    def __init__(self, features: int = 4, classes: int = 3) -> None:
        super().__init__(features, classes)
        self.norm = nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm(self.fc1(x)))
        return self.out(torch.relu(self.fc2(h)))


class Normed(Sharing):
    @classmethod
    def space(cls) -> ModelSpace:
        return ModelSpace(NormedMlp, [OperatorMutator("act", "relu*", {"relu": None, "tanh": lambda _: nn.Tanh()})])


def test_a_trial_scored_on_shared_weights_reestimates_its_batch_norm_statistics(blobs: Path) -> None:
    """The statistics that came with the shared weights were gathered under other architectures (here: set to
    100); an evaluation re-estimates them on training batches, unless told to keep them."""
    state = params(train(blobs, template=Normed)[0])
    (mean,) = [key for key in state if key.startswith("supernet.") and key.endswith("norm.running_mean")]
    state[mean] = np.full_like(state[mean], 100.0)
    scored, _ = train(blobs, state, Normed, skip_train=True)
    assert float(scored.module.norm.running_mean.abs().max()) < 10
    Normed.recalibration_batches = 0
    try:
        kept, _ = train(blobs, state, Normed, skip_train=True)
    finally:
        del Normed.recalibration_batches
    assert torch.equal(kept.module.norm.running_mean, torch.full((16,), 100.0))
