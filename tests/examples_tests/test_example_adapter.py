"""examples/models/torch_adapter.py: a searched head on the frozen base of a zoo TorchCnn.

The zoo is a dict here: a TorchCnn of the adapter's base architecture is trained in-process
and its module state handed to each trial as ``TrialContext.zoo_params``, as the platform's
worker hands it the zoo models its job's owner may see.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from baobab.model import (
    FixedKnob,
    FusedStatus,
    TrialContext,
    fuse_check,
    load_template,
    module_state,
    train_fused,
    trial_context,
    validate_knob_config,
    validate_knobs,
)
from baobab.model._fused import _Member, _plan, _prepare, _Stack
from baobab.store import params_from_bytes, params_to_bytes, write_image_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
Cnn = load_template(EXAMPLES / "torch_cnn.py", "TorchCnn")
Adapter = load_template(EXAMPLES / "torch_adapter.py", "TorchAdapter")

ZOO_ID = 7
ROWS, BATCH = 160, 32
#: tests/model_tests/test_fused.py's tolerances: parameters with a gradient, per-epoch losses.
ATOL, LOSS_ATOL = 3e-6, 1e-6
#: The CNN's knobs that make the adapter's base (its FixedKnobs' defaults).
BASE = {"channels": 16, "depth": 2, "kernel_size": 3}
OFF = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """One torch thread, as test_fused.py's tolerances were measured."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def quadrants(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """12x12 grey noise with a bright quadrant: the quadrant is the class (four)."""
    labels = rng.integers(0, 4, count)
    pixels = rng.integers(0, 60, (count, 12, 12)).astype(np.uint8)
    for image, label in zip(pixels, labels, strict=True):
        row, col = divmod(int(label), 2)
        image[row * 6 : row * 6 + 6, col * 6 : col * 6 + 6] += 150
    return pixels, labels


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[str, str]:
    rng = np.random.default_rng(3)
    folder = tmp_path_factory.mktemp("quadrants")
    train = write_image_files(folder / "train.zip", *quadrants(rng, ROWS))
    return str(train), str(write_image_files(folder / "val.zip", *quadrants(rng, 80)))


def cnn(images: str, **overrides):
    """A TorchCnn trained briefly (the zoo model), as the platform would have trained it."""
    knobs = {"learning_rate": 3e-3, "dropout": 0.0, "epochs": 2, "batch_size": BATCH, **BASE, **OFF, **overrides}
    model = Cnn(**knobs)
    with trial_context(TrialContext()):
        model.train(images, seed=5)
    return model


@pytest.fixture(scope="module")
def zoo(images) -> dict[int, dict[str, np.ndarray]]:
    return {ZOO_ID: module_state_arrays(cnn(images[0]))}


def module_state_arrays(model) -> dict[str, np.ndarray]:
    """A zoo model's module state as the zoo hands it over: state-dict names to arrays."""
    return {name: t.numpy() for name, t in module_state(model.dump_parameters()).items()}


def adapter(**overrides):
    """A TorchAdapter with its fixed knobs (base architecture, epochs, batch size) and these searched ones."""
    config = validate_knob_config(Adapter.get_knob_config())
    fixed = {name: knob.value for name, knob in config.items() if isinstance(knob, FixedKnob)}
    knobs = {"learning_rate": 1e-2, "weight_decay": 1e-3, "dropout": 0.0, "adapter_width": 32}
    return Adapter(**validate_knobs(config, {**fixed, **knobs, "early_stop": False, "quick_eval": False, **overrides}))


def zoo_context(zoo) -> TrialContext:
    return TrialContext(zoo_params=zoo.__getitem__)


def alone(zoo, images: str, seed: int, **knobs):
    model, context = adapter(**knobs), zoo_context(zoo)
    with trial_context(context):
        model.train(images, seed=seed, base_model=ZOO_ID)
    return model, context


def base_state(model) -> dict[str, torch.Tensor]:
    return model.module.base.layers.state_dict()


def assert_base_is_the_zoo_models(model, zoo) -> None:
    """Every tensor of the base (weights and BatchNorm statistics) is the zoo model's, exactly."""
    state = base_state(model)
    assert set(state) == set(zoo[ZOO_ID]) - {"10.weight", "10.bias"}  # all but the CNN's classifier
    for name, tensor in state.items():
        np.testing.assert_array_equal(tensor.cpu().numpy(), zoo[ZOO_ID][name], err_msg=name)


def test_the_head_learns_on_the_zoo_models_frozen_base(zoo, images):
    train, val = images
    model, context = alone(zoo, train, 1)
    assert_base_is_the_zoo_models(model, zoo)  # BatchNorm's running statistics and counts did not move
    assert context.logs == [f"base: 14 tensors of zoo model {ZOO_ID}, frozen"]
    assert [m.step for m in context.metrics] == list(range(5))
    assert not any(p.requires_grad for p in model.module.base.parameters())
    assert all(p.requires_grad for p in model.module.head.parameters())
    assert model.evaluate(val) > 0.7  # chance is 0.25
    model.module.train()  # the base stays in eval mode inside a network put in train mode
    assert not any(layer.training for layer in model.module.base.layers) and model.module.head.training


def test_parameters_round_trip_without_the_zoo(zoo, images):
    train, val = images
    model, _ = alone(zoo, train, 2, dropout=0.2, adapter_width=64)
    queries = [np.zeros((12, 12), int).tolist(), np.full((12, 12), 200).tolist()]
    fresh = adapter(dropout=0.2, adapter_width=64)
    with trial_context(TrialContext()):  # no zoo: the saved parameters hold the base
        fresh.load_parameters(params_from_bytes(params_to_bytes(model.dump_parameters())))
    assert fresh.predict(queries) == model.predict(queries)
    assert fresh.evaluate(val) == model.evaluate(val)
    assert fresh.train_args == {"base_model": ZOO_ID}
    assert_base_is_the_zoo_models(fresh, zoo)


def another_cnn_state(**knobs) -> dict[str, np.ndarray]:
    """The module state of an untrained TorchCnn with other knobs (only its shapes matter)."""
    model = Cnn(**{"learning_rate": 1e-3, "dropout": 0.0, "epochs": 1, "batch_size": BATCH, **BASE, **OFF, **knobs})
    model.input_shape, model.output_size = (1, 12, 12), 4
    return {name: t.numpy() for name, t in model.build_module(False).state_dict().items()}


@pytest.mark.parametrize(
    ("knobs", "mismatch"),
    [
        ({"channels": 8}, "its tensor '0.weight' has shape (8, 1, 3, 3), expected (16, 1, 3, 3)"),
        ({"kernel_size": 5}, "its tensor '0.weight' has shape (16, 1, 5, 5), expected (16, 1, 3, 3)"),
        ({"depth": 1}, "it has no tensor '4.weight' (expected shape (32, 16, 3, 3))"),
        ({"depth": 3}, "it has a further convolution '8.weight' of shape (64, 32, 3, 3) (a deeper network)"),
    ],
)
def test_a_zoo_model_of_another_architecture_is_refused_naming_the_mismatch(images, knobs, mismatch):
    other = {ZOO_ID: another_cnn_state(**knobs)}
    with pytest.raises(ValueError) as refused:
        alone(other, images[0], 1)
    assert str(refused.value) == (
        f"zoo model {ZOO_ID} is not the base TorchAdapter expects (the convolutional blocks of a TorchCnn with "
        f"base_channels=16, base_depth=2, base_kernel_size=3 on inputs of shape (1, 12, 12)): {mismatch}"
    )


def test_without_the_zoo_it_says_it_needs_the_platform(images):
    model = adapter()
    with trial_context(TrialContext()), pytest.raises(ValueError) as refused:
        model.train(images[0], seed=1, base_model=ZOO_ID)
    assert str(refused.value) == (
        f"TorchAdapter needs zoo model {ZOO_ID} and runs only where the platform gives the trial access to the "
        "zoo (a train job), not in `baobab dev test-model` or outside the platform"
    )


@pytest.mark.parametrize("value", [None, "7", 0, True])
def test_without_a_base_model_train_arg_it_says_what_it_needs(zoo, images, value):
    args = {} if value is None else {"base_model": value}
    with trial_context(zoo_context(zoo)), pytest.raises(ValueError, match="needs the train arg 'base_model'"):
        adapter().train(images[0], seed=1, **args)


#: (learning rate, weight decay, seed) of three members.
MEMBERS = [(1e-3, 1e-4, 11), (1e-2, 1e-2, 22), (3e-3, 1e-1, 33)]


def test_members_fused_train_as_alone_on_one_copy_of_the_base(zoo, images):
    train, val = images
    knobs = [{"learning_rate": lr, "weight_decay": wd} for lr, wd, _ in MEMBERS]
    models = [adapter(**k) for k in knobs]
    contexts = [zoo_context(zoo) for _ in models]
    args = [{"seed": seed, "base_model": ZOO_ID} for _, _, seed in MEMBERS]
    outcomes = train_fused(models, train, contexts, train_args=args)
    assert [o.status for o in outcomes] == [FusedStatus.COMPLETED] * 3
    for model, context, k, (_, _, seed) in zip(models, contexts, knobs, MEMBERS, strict=True):
        assert context.logs == [f"base: 14 tensors of zoo model {ZOO_ID}, frozen"]  # no "not fused"
        single, single_context = alone(zoo, train, seed, **k)
        mine, theirs = model.dump_parameters(), single.dump_parameters()
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                np.testing.assert_allclose(mine[key], value, rtol=0, atol=ATOL, err_msg=key)
            elif isinstance(value, np.ndarray):
                np.testing.assert_array_equal(mine[key], value, err_msg=key)
            else:
                assert mine[key] == value, key
        losses = [m.metrics["loss"] for m in context.metrics]
        assert losses == pytest.approx([m.metrics["loss"] for m in single_context.metrics], abs=LOSS_ATOL)
        assert model.evaluate(val) == pytest.approx(single.evaluate(val), abs=2 / 80)
        assert_base_is_the_zoo_models(model, zoo)
    # The group holds one base: every member's module points at the same tensors.
    for name, _ in models[0].module.base.named_parameters():
        pointers = {m.module.base.get_parameter(name).untyped_storage().data_ptr() for m in models}
        assert len(pointers) == 1, name


def test_members_of_other_rates_decays_and_dropouts_stack_with_the_base_kept_once(zoo, images):
    knobs = [
        {"learning_rate": 1e-3, "weight_decay": 1e-4, "dropout": 0.0},
        {"learning_rate": 1e-2, "weight_decay": 1e-2, "dropout": 0.3},
        {"learning_rate": 2e-2, "weight_decay": 1e-1, "dropout": 0.5},
    ]
    members = [_Member(i, adapter(**k), zoo_context(zoo)) for i, k in enumerate(knobs)]
    for member in members:
        _prepare(member, images[0], None, {"seed": member.index, "base_model": ZOO_ID})
    assert fuse_check([m.model for m in members]) is None
    plan = _plan([(m.index, m.model, m.context) for m in members])
    assert not isinstance(plan, str), plan
    stack = _Stack(members, plan)
    base = {f"base.layers.{name}" for name, _ in members[0].module.base.layers.named_parameters()}
    statistics = {f"base.layers.{name}" for name, _ in members[0].module.base.layers.named_buffers()}
    assert set(stack.shared) == base | statistics  # kept once, unbatched: BatchNorm's stay in eval mode
    assert all(stack.shared[name].shape == members[0].module.get_parameter(name).shape for name in base)
    assert set(stack.buffers) == {"head.3.rate"}  # the dropout rates, one per member
    assert set(stack.params) == {f"head.{i}.{kind}" for i in (1, 4) for kind in ("weight", "bias")}
    assert set(stack.optimizer.settings) == set(stack.params)
    # A step trains the heads only: the base, its BatchNorm statistics included, stays the zoo model's.
    x = torch.stack([members[0].inputs[:BATCH]] * 3)
    y = torch.stack([members[0].targets[:BATCH]] * 3)
    before = {name: b.clone() for name, b in stack.shared.items()}
    losses, _ = stack.step(x, y, [1.0] * 3)
    assert torch.isfinite(losses).all()
    assert all(torch.equal(before[name], b) for name, b in stack.shared.items())
    stack.release(list(stack.members))
    for member in members:
        assert_base_is_the_zoo_models(member.model, zoo)
