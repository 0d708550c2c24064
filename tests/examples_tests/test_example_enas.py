"""The ENAS example template: one super-network shared across architectures, and the policies ENAS uses."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from baobab.advisor import trial_knobs
from baobab.model import TrialContext, trial_context, validate_knob_config
from baobab.store import (
    FASHION_MNIST_SOURCE,
    build_fashion_mnist,
    params_from_bytes,
    params_to_bytes,
)

torch = pytest.importorskip("torch")

from enas_cycle import PHASES, run_cycle  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "models" / "enas_cnn.py"


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example imported the way the platform does: as a single file."""
    spec = importlib.util.spec_from_file_location("example_enas_cnn", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def architecture(example: ModuleType, ops: list[str], skip: bool = False) -> list[Any]:
    """An ``arch`` value: the given operation per layer, every skip connection on or off."""
    arch: list[Any] = []
    for layer, op in enumerate(ops):
        arch += [op] + [skip] * layer
    return arch


def make(example: ModuleType, arch: list[Any], *policies: str, recalibration_batches: int | None = None) -> Any:
    config = validate_knob_config(example.EnasCnn.get_knob_config())
    model = example.EnasCnn(**trial_knobs(config, {"arch": arch}, dict.fromkeys(policies, True)))
    if recalibration_batches is not None:
        model.recalibration_batches = recalibration_batches
    return model


def state(model: Any) -> dict[str, Any]:
    return {name: tensor.clone() for name, tensor in model.module.state_dict().items()}


def test_the_search_space_is_enas_macro_space(example: ModuleType) -> None:
    knob = example.EnasCnn.get_knob_config()["arch"]
    assert len(knob.items) == 6 + 15  # an operation per layer, a skip flag per pair of layers
    assert knob.items[0] == example.OPS and knob.items[2] == (False, True)
    arch = architecture(example, ["conv3", "sep5", "max", "avg", "conv5", "sep3"], skip=True)
    assert example.decode(arch)[2] == ("max", (True, True))


def test_shared_parameters_carry_the_whole_super_network(example: ModuleType, image_sets: tuple[str, str]) -> None:
    train, val = image_sets
    first_arch = architecture(example, ["conv3", "sep3", "max", "conv5", "avg", "sep5"], skip=True)
    first = make(example, first_arch, "SHARE_PARAMS", "EARLY_STOP")
    first.train(train, seed=1)
    params = params_from_bytes(params_to_bytes(first.dump_parameters()))
    # Every operation of every layer is in the parameters, used by this architecture or not.
    assert {"module.layers.0.conv5.0.weight", "module.layers.5.sep3.1.weight"} <= set(params)
    # Another architecture starts from all of them, and skipping training leaves them as they are.
    other = make(example, architecture(example, ["sep5"] * 6), "SHARE_PARAMS", "SKIP_TRAIN", recalibration_batches=0)
    context = TrialContext()
    with trial_context(context):
        other.train(train, shared_params=params, seed=2)
    total = len(first.module.state_dict())
    assert context.logs == [f"loaded {total} of {total} tensors from shared_params"]
    assert context.metrics == []  # no epoch ran
    expected = state(first)
    assert all(torch.equal(tensor, expected[name]) for name, tensor in state(other).items())
    # The same architecture on the shared weights predicts what the original did.
    same = make(example, first_arch, "SHARE_PARAMS", "SKIP_TRAIN", recalibration_batches=0)
    same.train(train, shared_params=params, seed=3)
    queries = np.random.default_rng(0).integers(0, 255, (5, 12, 12)).tolist()
    assert same.predict(queries) == first.predict(queries)
    assert same.evaluate(val) == first.evaluate(val)


def test_scoring_on_shared_weights_re_estimates_only_the_path_batch_norms(
    example: ModuleType, image_sets: tuple[str, str]
) -> None:
    train, _ = image_sets
    trained = make(example, architecture(example, ["conv3"] * 6), "SHARE_PARAMS", "EARLY_STOP")
    trained.train(train, seed=1)
    params = trained.dump_parameters()
    scored = make(example, architecture(example, ["sep3"] * 6), "SHARE_PARAMS", "SKIP_TRAIN")
    scored.train(train, shared_params=params, seed=2)
    before, after = state(trained), state(scored)
    for name, parameter in scored.module.named_parameters():
        assert torch.equal(parameter, before[name]), name  # the weights are the shared ones
    changed = {name for name in after if not torch.equal(after[name], before[name])}
    # The statistics of the batch norms on the path: the stem's and sep3's (whose batch
    # count goes from 0 to 2; the stem's was 2 after its epoch, and is 2 again); conv3's
    # are kept for conv3.
    sep3_norms = [f"layers.{i}.sep3.2" for i in range(6)]
    expected = {f"{norm}.{stat}" for norm in ["stem.1", *sep3_norms] for stat in ("running_mean", "running_var")}
    assert changed == expected | {f"{norm}.num_batches_tracked" for norm in sep3_norms}


def test_quick_eval_scores_a_sample(example: ModuleType, image_sets: tuple[str, str]) -> None:
    train, val = image_sets
    sizes = []
    for policies in [(), ("QUICK_EVAL",)]:
        model = make(example, architecture(example, ["avg"] * 6), "EARLY_STOP", *policies)
        model.train(train, seed=0)
        score = model.score
        model.score = lambda outputs, targets, score=score: sizes.append(len(targets)) or score(outputs, targets)
        model.evaluate(val)
    assert sizes == [40, math.ceil(0.1 * 40)]


def test_downscale_builds_fewer_channels(example: ModuleType, image_sets: tuple[str, str]) -> None:
    train, _ = image_sets
    arch = architecture(example, ["conv5"] * 6, skip=True)
    full, small = make(example, arch, "EARLY_STOP"), make(example, arch, "EARLY_STOP", "DOWNSCALE")
    full.train(train, seed=0)
    small.train(train, seed=0)
    assert full.module.stem[0].out_channels == 16 and small.module.stem[0].out_channels == 8
    reloaded = make(example, arch, "DOWNSCALE")
    reloaded.load_parameters(params_from_bytes(params_to_bytes(small.dump_parameters())))
    assert reloaded.module.stem[0].out_channels == 8


@pytest.mark.skipif(not Path(FASHION_MNIST_SOURCE).is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_an_enas_search_on_fashion_mnist(example: ModuleType, tmp_path: Path) -> None:
    """The whole cycle in one process, with a shortened final training: phases, sharing, the controller.

    About 3 s, and 8 s run alone: the dataset builder imports scikit-learn.
    """
    built = {split.name: str(split.path) for split in build_fashion_mnist(tmp_path, limit=1000).splits}

    class Quick(example.EnasCnn):
        def epochs(self) -> int:
            return 2

    strategy, _, scores = run_cycle(Quick, built["train"], built["val"])
    assert [phase for phase, _ in scores.values()] == PHASES
    finals = {i: s for i, (phase, s) in scores.items() if phase == "final_evaluate"}
    best = max(finals, key=lambda i: (finals[i], -i))
    assert strategy.best_architecture() == strategy.history[best].knobs
    # Trained from scratch for two epochs on 900 images: measured 0.61; chance is 0.1.
    assert scores[8][1] > 0.4
