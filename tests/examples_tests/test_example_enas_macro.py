"""ENAS on the example model space EnasMacro: the space's decisions are the controller's positions, the
super-network SpaceModel hands on is the shared weights, and the policies ENAS uses reach the template."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from baobab.advisor import EnasPlanner, EnasStrategy, trial_knobs
from baobab.model import CategoricalKnob, TrialContext, trial_context, validate_knob_config
from baobab.store import (
    FASHION_MNIST_SOURCE,
    build_fashion_mnist,
    params_from_bytes,
    params_to_bytes,
)

torch = pytest.importorskip("torch")

from enas_cycle import PHASES, run_cycle  # noqa: E402

# One torch thread, as the ENAS example's tests (image_sets, the bar images, is in conftest).
from test_example_enas import one_torch_thread  # noqa: E402, F401

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spaces" / "enas_macro.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example imported the way the platform does: as a single file."""
    spec = importlib.util.spec_from_file_location("example_enas_macro", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def architecture(example: ModuleType, ops: list[str], skip: bool = False) -> dict[str, str]:
    """The decisions of an architecture: the given operation per layer, every skip connection on or off."""
    choices = {f"op{i}": op for i, op in enumerate(ops)}
    for i in range(len(ops)):
        for j in range(i):
            choices[f"skip{i}_{j}"] = f"layers_{i}_skip_from_{j}" if skip else f"layers_{i}_no_skip"
    return choices


def make(example: ModuleType, choices: dict[str, str], *policies: str, recalibration_batches: int | None = None) -> Any:
    config = validate_knob_config(example.EnasMacro.get_knob_config())
    model = example.EnasMacro(**trial_knobs(config, choices, dict.fromkeys(policies, True)))
    if recalibration_batches is not None:
        model.recalibration_batches = recalibration_batches
    return model


def params(model: Any) -> dict[str, Any]:
    return params_from_bytes(params_to_bytes(model.dump_parameters()))


def test_the_controller_chooses_each_decision_of_enas_macro_space(example: ModuleType) -> None:
    config = validate_knob_config(example.EnasMacro.get_knob_config())
    EnasPlanner(config, trial_budget=20)  # the policies ENAS needs are declared
    strategy = EnasStrategy(config, seed=0)
    decisions = {name: knob for name, knob in config.items() if isinstance(knob, CategoricalKnob)}
    assert len(decisions) == 6 + 15  # an operation per layer, a skip choice per pair of layers
    assert decisions["op0"].values == example.OPS and len(decisions["skip2_1"].values) == 2
    proposal = strategy.propose(0)
    assert set(decisions) <= set(proposal)
    assert make(example, {name: proposal[name] for name in decisions}).choices() == {
        name: proposal[name] for name in decisions
    }


def test_a_trial_on_the_shared_weights_starts_from_every_candidate_trained_before(
    example: ModuleType, image_sets: tuple[str, str]
) -> None:
    """conv3 everywhere, then sep3 everywhere, then conv3 again with SKIP_TRAIN: the third starts from the first's
    conv3 weights, which the second did not use but handed on, and from the stem the second trained on."""
    train, val = image_sets
    first = make(example, architecture(example, ["conv3"] * 6), "SHARE_PARAMS", "EARLY_STOP")
    first.train(train, seed=1)
    second = make(example, architecture(example, ["sep3"] * 6, skip=True), "SHARE_PARAMS", "EARLY_STOP")
    second.train(train, shared_params=params(first), seed=2)
    handed = params(second)
    third = make(example, architecture(example, ["conv3"] * 6), "SHARE_PARAMS", "SKIP_TRAIN", recalibration_batches=0)
    context = TrialContext()
    with trial_context(context):
        third.train(train, shared_params=handed, seed=3)
    assert context.metrics == []  # no epoch ran
    own, before = third.module.state_dict(), first.module.state_dict()
    convs = [name for name in own if "_op" in name or ".op." in name]
    assert convs and all(torch.equal(own[name], before[name]) for name in convs if "num_batches" not in name)
    stem = [name for name in own if name.startswith("stem")]
    assert all(torch.equal(own[name], second.module.state_dict()[name]) for name in stem)
    assert "inherited" in context.logs[-1] and "super-network keeps" in context.logs[-1]


def test_scoring_on_shared_weights_re_estimates_the_batch_norms(
    example: ModuleType, image_sets: tuple[str, str]
) -> None:
    train, _ = image_sets
    arch = architecture(example, ["conv3"] * 6)
    trained = make(example, arch, "SHARE_PARAMS", "EARLY_STOP")
    trained.train(train, seed=1)
    scored = make(example, arch, "SHARE_PARAMS", "SKIP_TRAIN")
    scored.train(train, shared_params=params(trained), seed=2)
    before, after = trained.module.state_dict(), scored.module.state_dict()
    for name, parameter in scored.module.named_parameters():
        assert torch.equal(parameter, before[name]), name  # the weights are the shared ones
    changed = {name for name in after if not torch.equal(after[name], before[name])}
    assert changed and all(name.endswith(("running_mean", "running_var", "num_batches_tracked")) for name in changed)


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


def test_downscale_builds_fewer_channels_and_early_stop_one_epoch(
    example: ModuleType, image_sets: tuple[str, str]
) -> None:
    train, _ = image_sets
    arch = architecture(example, ["conv5"] * 6, skip=True)
    full, small = make(example, arch, "EARLY_STOP"), make(example, arch, "EARLY_STOP", "DOWNSCALE")
    context = TrialContext()
    with trial_context(context):
        full.train(train, seed=0)
    small.train(train, seed=0)
    assert [m.step for m in context.metrics] == [0]  # one epoch of ten
    stem = "stem.0"
    assert full.module.get_submodule(stem).out_channels == 16 and small.module.get_submodule(stem).out_channels == 8
    reloaded = make(example, arch, "DOWNSCALE")
    reloaded.load_parameters(params(small))
    assert reloaded.module.get_submodule(stem).out_channels == 8


@pytest.mark.skipif(not Path(FASHION_MNIST_SOURCE).is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_an_enas_search_on_fashion_mnist(example: ModuleType, tmp_path: Path) -> None:
    """The whole cycle in one process, with a shortened final training: phases, sharing, the controller."""
    built = {split.name: str(split.path) for split in build_fashion_mnist(tmp_path, limit=1000).splits}

    class Quick(example.EnasMacro):
        def epochs(self) -> int:
            return 2

    strategy, _, scores = run_cycle(Quick, built["train"], built["val"])
    assert [phase for phase, _ in scores.values()] == PHASES
    finals = {i: s for i, (phase, s) in scores.items() if phase == "final_evaluate"}
    best = max(finals, key=lambda i: (finals[i], -i))
    assert strategy.best_architecture() == strategy.history[best].knobs
    assert scores[8][1] > 0.4  # trained from scratch for two epochs on 900 images; chance is 0.1
