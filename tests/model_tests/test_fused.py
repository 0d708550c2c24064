"""Fused training: each member of a stack ends as its unfused TorchModel.train run would.

Tolerances, from float32 CPU runs (one torch thread) of these tests: parameters and
buffers with a real gradient differed from the unfused runs by at most 2.6e-7 (the
CNN; the MLP 9e-8, the optimizer cases 1.2e-7), per-epoch losses by 1.2e-7, scores not
at all; a 784-32-10 MLP came out bit-equal, and a CNN on noisy 12x12 images with random
labels within 5e-6. The checks allow about ten times that. One kind of state is the
exception: a convolution's bias right before a BatchNorm has a true gradient of zero,
so Adam normalises rounding noise into steps of up to about the learning rate, and the
fused and unfused noise differ (vmap convolves as one grouped convolution). Such a
bias, and the running mean that follows it, are held to twice the learning rate times
the number of steps (each run walks it by up to about the learning rate a step, its own
way; measured 0.2 of a bound of 0.6). The network's function does not depend on it
while training, but the running mean lags it, so in evaluation a near tie may flip:
scores are held to two examples.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from baobab.model import (
    FixedKnob,
    FusedStatus,
    InterimMetric,
    PolicyKnob,
    TorchModel,
    TrialContext,
    fuse_check,
    load_template,
    train_fused,
    trial_context,
)
from baobab.model._fused import _Data, _Member, _MemberDropout, _plan, _prepare, _Stack, _stack_state, _stacked_forward
from baobab.model._packing import stack_bytes
from baobab.store import write_image_files, write_tabular

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
Mlp = load_template(EXAMPLES / "torch_mlp.py", "TorchMlp")
Cnn = load_template(EXAMPLES / "torch_cnn.py", "TorchCnn")


class SkippingCnn(Cnn):
    """The CNN example, with the SKIP_TRAIN policy too."""

    @staticmethod
    def get_knob_config():
        return {**Cnn.get_knob_config(), "skip_train": PolicyKnob("SKIP_TRAIN")}


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Train on one thread, as the tolerances above were measured: two threads split the
    matrix products' sums otherwise, and the fused and unfused rounding drift apart."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


ROWS = 200
IMAGES = 160
BATCH = 32
#: Parameters and buffers with a real gradient (measured: up to 2.6e-7).
ATOL = 3e-6
#: Per-epoch mean losses (measured: up to 1.2e-7).
LOSS_ATOL = 1e-6
POLICIES = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}
#: (learning rate, seed, epochs) of three members.
MEMBERS = [(1e-3, 11, 2), (1e-2, 22, 4), (3e-3, 33, 3)]
CNN_MEMBERS = [(3e-3, 11, 2), (1e-2, 22, 4), (2e-2, 33, 3)]


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    """Three classes with string labels, told apart by the first two of six features."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, ROWS)
    x = rng.normal(0, 1, (ROWS, 6))
    x[:, 0] += 2.5 * (labels == 1)
    x[:, 1] += 2.5 * (labels == 2)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    frame["target"] = np.array(["ash", "birch", "cedar"])[labels]
    return str(write_tabular(tmp_path_factory.mktemp("table") / "train.csv", frame))


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> str:
    """10x10 grey noise with a bright quadrant: the quadrant is the class."""
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, IMAGES)
    pixels = rng.integers(0, 60, (IMAGES, 10, 10)).astype(np.uint8)
    for image, label in zip(pixels, labels, strict=True):
        row, col = divmod(int(label), 2)
        image[row * 5 : row * 5 + 5, col * 5 : col * 5 + 5] += 150
    return str(write_image_files(tmp_path_factory.mktemp("images") / "train.zip", pixels, labels))


def mlp_knobs(**overrides):
    knobs = dict(learning_rate=1e-2, hidden_size=16, hidden_layers=2, dropout=0.0, weight_decay=1e-3, **POLICIES)
    return {**knobs, "epochs": 3, "batch_size": BATCH, **overrides}


def cnn_knobs(**overrides):
    knobs = dict(learning_rate=1e-2, channels=4, depth=2, kernel_size=3, dropout=0.0, **POLICIES)
    return {**knobs, "epochs": 3, "batch_size": BATCH, **overrides}


def alone(cls, knobs, path, seed, context=None):
    model, context = cls(**knobs), context or TrialContext()
    with trial_context(context):
        model.train(path, seed=seed)
    return model, context


def fused(cls, knobs_list, path, seeds, contexts=None):
    models = [cls(**knobs) for knobs in knobs_list]
    contexts = contexts or [TrialContext() for _ in models]
    outcomes = train_fused(models, path, contexts, train_args=[{"seed": seed} for seed in seeds])
    return models, contexts, outcomes


def zero_gradient_state(module: torch.nn.Module) -> set[str]:
    """A convolution's bias right before a BatchNorm, and that BatchNorm's running mean."""
    layers = list(module.named_children())
    names = set()
    for (conv_name, conv), (norm_name, norm) in zip(layers, layers[1:], strict=False):
        if isinstance(conv, torch.nn.Conv2d) and isinstance(norm, torch.nn.BatchNorm2d) and conv.bias is not None:
            names |= {f"module.{conv_name}.bias", f"module.{norm_name}.running_mean"}
    return names


def assert_trains_as_alone(member, member_context, single, single_context, path, *, noise_atol=0.0):
    """``member`` (fused) ended where ``single`` (unfused) did, within the tolerances above."""
    rows = len(member.load_data(path)[1])
    noisy = zero_gradient_state(single.module) if noise_atol else set()
    mine, theirs = member.dump_parameters(), single.dump_parameters()
    assert mine.keys() == theirs.keys()
    for key, value in theirs.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            atol = noise_atol if key in noisy else ATOL
            np.testing.assert_allclose(mine[key], value, rtol=0, atol=atol, err_msg=key)
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(mine[key], value, err_msg=key)
        else:
            assert mine[key] == value, key
    assert [m.step for m in member_context.metrics] == [m.step for m in single_context.metrics]
    for ours, alone_metric in zip(member_context.metrics, single_context.metrics, strict=True):
        assert ours.metrics["loss"] == pytest.approx(alone_metric.metrics["loss"], abs=LOSS_ATOL)
        assert ours.metrics["train_score"] == pytest.approx(alone_metric.metrics["train_score"], abs=2 / rows)
    assert member_context.logs == single_context.logs
    assert member.evaluate(path) == pytest.approx(single.evaluate(path), abs=2 / rows)


def test_mlp_members_train_as_they_would_alone(table):
    knobs = [mlp_knobs(learning_rate=lr, epochs=epochs) for lr, _, epochs in MEMBERS]
    seeds = [seed for _, seed, _ in MEMBERS]
    models, contexts, outcomes = fused(Mlp, knobs, table, seeds)
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    for model, context, k, seed in zip(models, contexts, knobs, seeds, strict=True):
        single, single_context = alone(Mlp, k, table, seed)
        assert_trains_as_alone(model, context, single, single_context, table)
        assert len(context.metrics) == k["epochs"]
        # The string labels load_data() read for this member: its own train() ran.
        rows = pd.read_csv(table).drop(columns="target").to_numpy()[:20].tolist()
        assert model.predict(rows) == single.predict(rows)
        assert set(model.predict(rows)) <= {"ash", "birch", "cedar"}
    assert models[1].evaluate(table) > 0.8  # it learnt, too


def test_cnn_members_train_as_they_would_alone(images):
    knobs = [cnn_knobs(learning_rate=lr, epochs=epochs) for lr, _, epochs in CNN_MEMBERS]
    seeds = [seed for _, seed, _ in CNN_MEMBERS]
    models, contexts, outcomes = fused(Cnn, knobs, images, seeds)
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    for model, context, (lr, seed, epochs), k in zip(models, contexts, CNN_MEMBERS, knobs, strict=True):
        single, single_context = alone(Cnn, k, images, seed)
        steps = epochs * math.ceil(IMAGES / BATCH)
        assert_trains_as_alone(model, context, single, single_context, images, noise_atol=2 * lr * steps)
        # BatchNorm's batch statistics were kept per member (they differ between members).
        assert int(model.module.state_dict()["1.num_batches_tracked"]) == steps
    assert not torch.equal(models[0].module[1].running_var, models[1].module[1].running_var)


def test_a_diverging_member_fails_alone_and_the_others_train_on(table):
    knobs = [mlp_knobs(learning_rate=lr, epochs=3) for lr in (1e-2, 1e6, 3e-3)]
    models, contexts, outcomes = fused(Mlp, knobs, table, [1, 2, 3])
    assert outcomes[1].status is FusedStatus.FAILED
    assert re.fullmatch(
        r"the training loss is (nan|inf) in epoch 0, batch \d: training diverged \(is the learning rate too high\?\)",
        outcomes[1].reason,
    )
    assert contexts[1].logs == [outcomes[1].reason]
    for i in (0, 2):
        assert outcomes[i].status is FusedStatus.COMPLETED
        single, single_context = alone(Mlp, knobs[i], table, i + 1)
        assert_trains_as_alone(models[i], contexts[i], single, single_context, table)


def test_dropout_draws_per_member_masks_reproducibly(table):
    """Masks come from the stack's generator, not each trial's stream: not the unfused
    values, but the same on every run of the same group, and different per member."""
    knobs = [mlp_knobs(dropout=0.3, epochs=2)] * 2

    def run():
        models, _, outcomes = fused(Mlp, knobs, table, [4, 4])
        assert all(o.status is FusedStatus.COMPLETED for o in outcomes)
        return [m.dump_parameters()["module.1.weight"] for m in models]

    first, again = run(), run()
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], first[1])  # one seed, one start, other masks


def test_members_with_their_own_dropout_rates_train_as_one_stack(table):
    """Rates 0 and 0.5 stack: the member at 0 drops nothing (it ends as unfused), the other
    drops with the stack's masks, the same on every run."""
    knobs = [mlp_knobs(dropout=0.0, epochs=2), mlp_knobs(dropout=0.5, epochs=2)]

    def run():
        models, contexts, outcomes = fused(Mlp, knobs, table, [4, 5])
        assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 2
        assert [c.logs for c in contexts] == [[], []]  # no "not fused": one stack
        return models, contexts

    (models, contexts), (again, _) = run(), run()
    single, single_context = alone(Mlp, knobs[0], table, 4)
    assert_trains_as_alone(models[0], contexts[0], single, single_context, table)
    mine, theirs = models[1].dump_parameters(), again[1].dump_parameters()
    for key, value in mine.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(theirs[key], value, err_msg=key)
    undropped = alone(Mlp, knobs[0], table, 5)[0].dump_parameters()["module.1.weight"]
    assert np.abs(mine["module.1.weight"] - undropped).max() > 100 * ATOL  # it did drop
    assert models[1].module[3].p == 0.5  # the member's own layer keeps its rate


@pytest.mark.parametrize("layer", [torch.nn.Dropout, torch.nn.Dropout2d])
def test_a_stacked_dropout_layer_drops_each_members_share(layer):
    rates = [0.0, 0.1, 0.5, 0.9, 1.0]
    modules = [torch.nn.Sequential(layer(p)) for p in rates]
    params, shared, buffers = _stack_state(modules, torch.device("cpu"))
    x = torch.full((len(rates), 64, 64, 2, 2), 3.0)  # per member (N, C, H, W): 4096 channels, 16384 values
    torch.manual_seed(0)
    out = _stacked_forward(modules[0])(params, shared, buffers, x)
    for p, y in zip(rates, out, strict=True):
        if layer is torch.nn.Dropout2d:  # a channel is kept or dropped whole
            assert torch.equal(y.amax(dim=(2, 3)), y.amin(dim=(2, 3)))
            y = y[:, :, 0, 0]
        dropped = float((y == 0).float().mean())
        assert dropped == pytest.approx(p, abs=0.03), p  # a standard deviation is at most 0.008
        kept = y[y != 0]
        torch.testing.assert_close(kept, torch.full_like(kept, 3 / (1 - p)) if p < 1 else kept)
    assert torch.equal(out[0], x[0])  # rate 0: the input itself
    dropout = _MemberDropout(layer(0.5))
    dropout.rate = torch.tensor(0.5)
    one = x[0]
    assert dropout.eval()(one) is one


class StopAfterChecks(TrialContext):
    """Asks to stop once training has looked at ``should_stop`` ``checks`` times (once a batch)."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    @property
    def should_stop(self) -> bool:
        self.checks -= 1
        if self.checks < 0:
            self.request_stop("time limit")
        return self.stop_reason is not None


class StopAt:
    """A sink that answers the report of epoch ``step`` with stop."""

    def __init__(self, step):
        self.step = step

    def on_report(self, metric: InterimMetric) -> bool:
        return metric.step >= self.step

    def on_log(self, message: str) -> None:
        pass


def test_a_stop_request_stops_only_its_member(table):
    knobs = [mlp_knobs(learning_rate=lr, epochs=4) for lr in (1e-2, 3e-3, 1e-3)]
    batches = math.ceil(ROWS / BATCH)
    # Member 0 is stopped between batches in its second epoch, member 2 by the answer to its second report.
    contexts = [StopAfterChecks(batches + 3), TrialContext(), TrialContext(sink=StopAt(1))]
    models, contexts, outcomes = fused(Mlp, knobs, table, [5, 6, 7], contexts)
    assert [o.status for o in outcomes] == [FusedStatus.STOPPED, FusedStatus.COMPLETED, FusedStatus.STOPPED]
    assert outcomes[0].reason == "time limit"
    assert contexts[0].logs == ["stopped in epoch 1: time limit"]
    assert contexts[2].logs == ["stopped after epoch 1: stopped early by the platform"]
    unfused = [StopAfterChecks(batches + 3), TrialContext(), TrialContext(sink=StopAt(1))]
    for i in range(3):
        single, single_context = alone(Mlp, knobs[i], table, 5 + i, unfused[i])
        assert_trains_as_alone(models[i], contexts[i], single, single_context, table)


def test_early_stop_and_skip_train_apply_per_member(images):
    knobs = [cnn_knobs(epochs=8, early_stop=True), cnn_knobs(epochs=3), cnn_knobs(skip_train=True)]
    models, contexts, outcomes = fused(SkippingCnn, knobs, images, [1, 2, 3])
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    assert [len(c.metrics) for c in contexts] == [2, 3, 0]
    for i in range(3):
        single, single_context = alone(SkippingCnn, knobs[i], images, i + 1)
        steps = len(single_context.metrics) * math.ceil(IMAGES / BATCH)
        assert_trains_as_alone(models[i], contexts[i], single, single_context, images, noise_atol=2 * 1e-2 * steps)


class Net(TorchModel):
    """Two linear layers on an ``.npz`` of ``x`` and ``y``; the optimizer and its settings are knobs."""

    @staticmethod
    def get_knob_config():
        return {"epochs": FixedKnob(3), "batch_size": FixedKnob(16), "skip_train": PolicyKnob("SKIP_TRAIN")}

    def build_module(self, downscale):
        if self.knobs.get("width", 8) < 1:
            raise ValueError(f"width must be at least 1, got {self.knobs['width']}")
        width = self.knobs.get("width", 8)
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], width), torch.nn.Tanh(), torch.nn.Linear(width, self.output_size)
        )

    def load_data(self, dataset_path):
        with np.load(dataset_path) as data:
            return data["x"], data["y"]

    def preprocess(self, inputs):
        return super().preprocess(inputs) * self.knobs.get("input_scale", 1.0)

    def make_optimizer(self, params):
        settings = dict(self.knobs.get("optimizer", {"kind": "adam"}))
        kind = settings.pop("kind")
        params = list(params)
        if settings.pop("bias_group", False):  # biases: no weight decay, half the learning rate
            groups = [{"params": [p for p in params if p.dim() > 1]}]
            groups.append(
                {"params": [p for p in params if p.dim() == 1], "weight_decay": 0.0, "lr": settings["lr"] / 2}
            )
            params = groups
        optimizer = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[kind]
        return optimizer(params, **settings)


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> str:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 120)
    x = (np.eye(3, 5)[y] * 3 + rng.normal(0, 0.7, (120, 5))).astype(np.float32)
    path = tmp_path_factory.mktemp("blobs") / "blobs.npz"
    np.savez(path, x=x, y=y.astype(np.int64))
    return str(path)


OPTIMIZERS = {
    "Adam, every setting its own": [
        {"kind": "adam", "lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
        {"kind": "adam", "lr": 3e-2, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 1e-2},
        {"kind": "adam", "lr": 5e-3, "betas": (0.95, 0.9), "eps": 1e-7, "weight_decay": 1e-3},
    ],
    "AdamW, shared betas": [
        {"kind": "adamw", "lr": 1e-2, "weight_decay": 1e-2},
        {"kind": "adamw", "lr": 2e-2, "weight_decay": 0.1},
    ],
    "SGD, momentum, Nesterov and dampening mixed": [
        {"kind": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
        {"kind": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0},
        {"kind": "sgd", "lr": 0.2, "momentum": 0.5, "dampening": 0.3, "weight_decay": 1e-2},
    ],
    "SGD, no momentum": [{"kind": "sgd", "lr": 0.1}, {"kind": "sgd", "lr": 0.3}],
    "Adam with a parameter group": [
        {"kind": "adam", "lr": 1e-2, "weight_decay": 1e-2, "bias_group": True},
        {"kind": "adam", "lr": 4e-2, "weight_decay": 1e-3, "bias_group": True},
    ],
}


@pytest.mark.parametrize("settings", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_each_member_keeps_its_own_optimizer_settings(blobs, settings):
    knobs = [{"optimizer": s, "epochs": 3, "batch_size": 16} for s in settings]
    models, contexts, outcomes = fused(Net, knobs, blobs, range(len(knobs)))
    assert all(o.status is FusedStatus.COMPLETED for o in outcomes)
    for i, (model, context) in enumerate(zip(models, contexts, strict=True)):
        single, single_context = alone(Net, knobs[i], blobs, i)
        assert_trains_as_alone(model, context, single, single_context, blobs)


class Adapted(Net):
    """A trained linear head on a two-layer base that is frozen (``frozen``, default True) and
    drawn from the ``base_seed`` knob (default 0): the same in every member, as if loaded
    from one zoo model."""

    def build_module(self, downscale):
        width = self.knobs.get("width", 8)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.knobs.get("base_seed", 0))
            base = torch.nn.Sequential(
                torch.nn.Linear(self.input_shape[0], width),
                torch.nn.Tanh(),
                torch.nn.Linear(width, width),
                torch.nn.Tanh(),
            )
        base.requires_grad_(not self.knobs.get("frozen", True))
        return torch.nn.Sequential(base, torch.nn.Linear(width, self.output_size))


BASE = {"0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias"}


def adapter_knobs(count, **knobs):
    """``count`` members, each with its own learning rate."""
    return [{"optimizer": {"kind": "adam", "lr": 1e-2 * (i + 1)}, **knobs} for i in range(count)]


def stack_of(cls, knobs_list, path):
    """A stack of members prepared by their own ``train()`` (member ``i`` with seed ``i``), and its data."""
    members = [_Member(i, cls(**knobs), TrialContext()) for i, knobs in enumerate(knobs_list)]
    for member in members:
        _prepare(member, path, None, {"seed": member.index})
    plan = _plan([(m.index, m.model, m.context) for m in members])
    assert not isinstance(plan, str), plan
    first = members[0]
    return _Stack(members, plan), _Data(first.inputs, first.targets, first.model.device)


def test_members_on_one_frozen_base_train_as_alone_and_share_it(blobs):
    knobs = adapter_knobs(3)
    models, contexts, outcomes = fused(Adapted, knobs, blobs, [1, 2, 3])
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    untrained = alone(Adapted, {"skip_train": True}, blobs, 0)[0].module[0].state_dict()
    for i, (model, context) in enumerate(zip(models, contexts, strict=True)):
        assert context.logs == []  # fused
        single, single_context = alone(Adapted, knobs[i], blobs, i + 1)
        assert_trains_as_alone(model, context, single, single_context, blobs)
        for name, value in model.module[0].state_dict().items():
            assert torch.equal(value, untrained[name]), name  # the base is as it was
    stack, _ = stack_of(Adapted, knobs, blobs)
    module = stack.members[0].module
    assert set(stack.shared) == BASE
    assert all(stack.shared[name].shape == module.get_parameter(name).shape for name in BASE)  # one copy
    assert {name: tuple(p.shape) for name, p in stack.params.items()} == {"1.weight": (3, 3, 8), "1.bias": (3, 3)}
    assert set(stack.optimizer.settings) == {"1.weight", "1.bias"}
    # The members' own modules hold that one copy too: the group keeps the base once.
    for name in BASE:
        storages = {m.module.get_parameter(name).untyped_storage().data_ptr() for m in stack.members}
        assert storages == {stack.shared[name].untyped_storage().data_ptr()}, name


def test_members_on_their_own_frozen_bases_stack_them(blobs):
    knobs = [{**k, "base_seed": i} for i, k in enumerate(adapter_knobs(3))]
    models, contexts, outcomes = fused(Adapted, knobs, blobs, [1, 2, 3])
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    for i, (model, context) in enumerate(zip(models, contexts, strict=True)):
        assert context.logs == []  # fused
        single, single_context = alone(Adapted, knobs[i], blobs, i + 1)
        assert_trains_as_alone(model, context, single, single_context, blobs)
    assert not torch.equal(models[0].module[0][0].weight, models[1].module[0][0].weight)
    stack, _ = stack_of(Adapted, knobs, blobs)
    assert stack.shared == {}
    assert stack.params["0.0.weight"].shape == (3, 8, 5) and not stack.params["0.0.weight"].requires_grad


def stacked_bytes(count, frozen, blobs):
    """Bytes of a stack of ``count`` members with a 4 MiB base after one step: parameters, their
    gradients, buffers and the optimizer's state; and what stack_bytes estimates."""
    stack, data = stack_of(Adapted, adapter_knobs(count, width=1024, frozen=frozen), blobs)
    x, y = data.rows([torch.arange(16)] * count)
    stack.step(x, y, [1.0] * count)
    grads = [p.grad for p in stack.params.values() if p.grad is not None]
    state = [t for per_param in stack.optimizer.state.values() for t in per_param.values()]
    tensors = [*stack.params.values(), *grads, *stack.shared.values(), *stack.buffers.values(), *state]
    return sum(t.numel() * t.element_size() for t in tensors), stack_bytes(stack.members[0].model, count)


def test_a_shared_frozen_base_is_held_once_whatever_the_stack_size(blobs):
    base = (5 * 1024 + 1024 + 1024 * 1024 + 1024) * 4
    shared = {k: stacked_bytes(k, True, blobs) for k in (1, 16)}
    trained = {k: stacked_bytes(k, False, blobs) for k in (1, 16)}
    print(f"stack bytes, base {base}: frozen and shared {shared}, trained {trained}")
    assert shared[16][0] - shared[1][0] < base
    assert trained[16][0] - trained[1][0] > 15 * base
    for measured, estimated in (*shared.values(), *trained.values()):
        assert measured == estimated


def test_a_member_whose_setup_fails_ends_failed_alone(blobs):
    knobs = [{"width": 8}, {"width": 0}, {"width": 8, "skip_train": True}]
    models, contexts, outcomes = fused(Net, knobs, blobs, [1, 2, 3])
    assert outcomes[1].status is FusedStatus.FAILED
    assert outcomes[1].reason == "train() before its loop raised ValueError: width must be at least 1, got 0"
    assert isinstance(outcomes[1].error, ValueError)
    assert outcomes[0].status is outcomes[2].status is FusedStatus.COMPLETED
    single, single_context = alone(Net, knobs[0], blobs, 1)
    assert_trains_as_alone(models[0], contexts[0], single, single_context, blobs)
    assert contexts[2].metrics == []  # SKIP_TRAIN: built, not trained


def test_a_warm_start_scales_each_members_learning_rate_as_unfused(blobs):
    donor, _ = alone(Net, {}, blobs, 9)

    class Parent:
        state = donor.module.state_dict()
        lr_scale = 0.25

        def summary(self):
            return "from the donor"

    def warm_context():
        context = TrialContext()
        context.warm_starter = lambda module, example: Parent()
        return context

    knobs = [{"optimizer": {"kind": "adam", "lr": lr}, "epochs": 4} for lr in (1e-2, 3e-2)]
    contexts = [warm_context(), TrialContext()]
    models, contexts, _ = fused(Net, knobs, blobs, [1, 2], contexts)
    assert contexts[0].logs == ["from the donor; learning rate x0.25 at first"]
    for i, context in enumerate([warm_context(), TrialContext()]):
        single, single_context = alone(Net, knobs[i], blobs, i + 1, context)
        assert_trains_as_alone(models[i], contexts[i], single, single_context, blobs)


def test_fuse_check_names_what_differs(table, images):
    def built(cls, knobs):
        return alone(cls, {**knobs, "epochs": 1}, table if cls is Mlp else images, 0)[0]

    same = [built(Mlp, mlp_knobs(learning_rate=lr)) for lr in (1e-3, 1e-2)]
    assert fuse_check(same) is None
    wider = built(Mlp, mlp_knobs(hidden_size=32))
    assert fuse_check([same[0], wider]) == (
        "member 1 differs from member 0 in parameters: '1.weight (32, 6) torch.float32 requires grad' "
        "instead of '1.weight (16, 6) torch.float32 requires grad' (line 1)"
    )
    assert fuse_check([same[0], built(Mlp, mlp_knobs(batch_size=16))]) == (
        "member 1 differs from member 0 in batch size: '16' instead of '32'"
    )
    assert fuse_check([same[0], built(Mlp, mlp_knobs(dropout=0.3))]) is None  # a dropout rate is per member
    message = fuse_check([built(Cnn, cnn_knobs()), built(Cnn, cnn_knobs(kernel_size=5))])
    assert message.startswith("member 1 differs from member 0 in parameters: '0.weight (4, 1, 5, 5)")
    assert "member 1 has no module yet" in fuse_check([same[0], Mlp(**mlp_knobs())])


def test_fuse_check_refuses_what_the_stacked_step_does_not_reproduce(blobs):
    def built(optimizer):
        return alone(Net, {"optimizer": optimizer, "epochs": 1}, blobs, 0)[0]

    adam, sgd = built({"kind": "adam", "lr": 1e-2}), built({"kind": "sgd", "lr": 0.1})
    assert "optimizers differ in kind" in fuse_check([adam, sgd])
    assert fuse_check([adam, built({"kind": "adam", "lr": 1e-2, "amsgrad": True})]) == (
        "member 1: Adam with amsgrad=True is not supported fused"
    )
    skipping = alone(Net, {"skip_train": True}, blobs, 0)[0]
    assert fuse_check([skipping, skipping]) == "no member trains (all under SKIP_TRAIN)"


class DropNet(Net):
    """Net with a dropout layer after its first linear one: its class, rate and inplace from the ``dropout`` knob."""

    def build_module(self, downscale):
        module = super().build_module(downscale)
        kind, p, inplace = self.knobs["dropout"]
        module.insert(1, getattr(torch.nn, kind)(p, inplace))
        return module


def test_fuse_check_compares_a_dropout_layer_but_its_rate(blobs):
    def built(*dropout):
        return alone(DropNet, {"dropout": dropout, "epochs": 1}, blobs, 0)[0]

    first = built("Dropout", 0.1, False)
    assert fuse_check([first, built("Dropout", 0.6, False)]) is None
    assert fuse_check([first, built("Dropout", 0.1, True)]) == (
        "member 1 differs from member 0 in module: '(1): Dropout(p=per member, inplace=True)' "
        "instead of '(1): Dropout(p=per member, inplace=False)' (line 3)"
    )
    assert fuse_check([first, built("Dropout1d", 0.1, False)]) == (
        "member 1 differs from member 0 in module: '(1): Dropout1d(p=per member, inplace=False)' "
        "instead of '(1): Dropout(p=per member, inplace=False)' (line 3)"
    )
    # A layer whose rate is not per member keeps it in the comparison.
    assert fuse_check([built("AlphaDropout", 0.1, False), built("AlphaDropout", 0.2, False)]) == (
        "member 1 differs from member 0 in module: '(1): AlphaDropout(p=0.2, inplace=False)' "
        "instead of '(1): AlphaDropout(p=0.1, inplace=False)' (line 3)"
    )


def test_a_group_that_cannot_be_stacked_trains_alone(table):
    knobs = [mlp_knobs(batch_size=16), mlp_knobs(batch_size=32)]
    models, contexts, outcomes = fused(Mlp, knobs, table, [1, 2])
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 2
    reason = "member 1 differs from member 0 in batch size: '32' instead of '16'"
    for i in range(2):
        assert contexts[i].logs == [f"not fused: {reason}; training alone"]
        single = alone(Mlp, knobs[i], table, i + 1)[0]
        for key, value in single.dump_parameters().items():  # the unfused loop itself: bit-equal
            np.testing.assert_array_equal(models[i].dump_parameters()[key], value)


@pytest.mark.parametrize(
    ("odd", "reason"),
    [
        ({"input_scale": 2.0}, "member 1's preprocessed inputs differ from member 0's"),
        ({"optimizer": {"kind": "rmsprop"}}, "member 1: make_loss() or make_optimizer() raised KeyError: 'rmsprop'"),
    ],
)
def test_members_that_differ_where_no_signature_shows_train_alone(blobs, odd, reason):
    knobs = [{"epochs": 2}, {"epochs": 2, **odd}, {"epochs": 2}]
    models, contexts, outcomes = fused(Net, knobs, blobs, [1, 2, 3])
    assert all(c.logs[0] == f"not fused: {reason}; training alone" for c in contexts)
    for i in (0, 2):
        assert outcomes[i].status is FusedStatus.COMPLETED
        single = alone(Net, knobs[i], blobs, i + 1)[0]
        for key, value in single.dump_parameters().items():
            np.testing.assert_array_equal(models[i].dump_parameters()[key], value)
    # Alone, the odd member trains on its own data, or fails on its own hook.
    assert outcomes[1].status is (FusedStatus.COMPLETED if "input_scale" in odd else FusedStatus.FAILED)


def test_one_context_per_model_is_required(table):
    with pytest.raises(ValueError, match="got 2 models but 1 contexts; give one per model"):
        train_fused([Mlp(**mlp_knobs()), Mlp(**mlp_knobs())], table, [TrialContext()])


def test_importing_the_model_package_does_not_import_torch_for_fusion():
    code = "import sys, baobab.model; assert 'torch' not in sys.modules; baobab.model.train_fused"
    subprocess.run([sys.executable, "-c", code], check=True)
