"""The example model spaces in examples/spaces: each defines, its instances run, every strategy searches it, one trains.

None of the three spaces can produce an invalid instance (every operation keeps its
input's shape, and a skip from larger maps is pooled to fit), so an instance that fails
its check fails these tests.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from test_example_models import bars, one_torch_thread  # noqa: F401 - the fixture trains on one thread here too

from baobab.advisor import STRATEGIES, make_strategy, trial_knobs
from baobab.model import CategoricalKnob, validate_knob_config
from baobab.store import params_from_bytes, params_to_bytes, write_image_files
from baobab.testing import run_search, typed

torch = pytest.importorskip("torch")
from baobab.space import ModelSpace, SpaceModel  # noqa: E402 - needs torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "spaces"
#: example file -> its template class
TEMPLATES = {"enas_macro": "EnasMacro", "darts_cell": "DartsCell", "mobilenet_blocks": "MobileNetBlocks"}


def load_example(name: str) -> ModuleType:
    """Import an example the way the platform does: as a single file, not as a package."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def examples() -> dict[str, ModuleType]:
    return {name: load_example(name) for name in TEMPLATES}


def template(examples: Mapping[str, ModuleType], name: str) -> type[SpaceModel]:
    return getattr(examples[name], TEMPLATES[name])


def choices_of(space: ModelSpace, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The decisions among a trial's knobs."""
    decisions = space.decisions()
    return {name: value for name, value in knobs.items() if name in decisions}


def parameter_count(space: ModelSpace, knobs: Mapping[str, Any]) -> float:
    """A cheap score: the parameters of the instance, built on the meta device (no memory, no compute)."""
    instance = space.instantiate(choices_of(space, knobs), device="meta")
    return float(sum(p.numel() for p in instance.module.parameters()))


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_template_searches_its_spaces_decisions_and_training_knobs(examples, name):
    cls = template(examples, name)
    space = cls.model_space()
    decisions = space.decisions()
    assert decisions and all(isinstance(knob, CategoricalKnob) for knob in decisions.values())
    config = validate_knob_config(cls.get_knob_config())
    assert set(config) == set(decisions) | set(cls.training_knobs())


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize(
    ("shape", "classes"), [((1, 28, 28), 10), ((3, 12, 12), 3)], ids=["fashion-mnist", "small-rgb"]
)
def test_random_instances_run_with_the_right_output_shape(examples, name, shape, classes):
    space = template(examples, name).model_space()
    args = {"in_channels": shape[0], "height": shape[1], "width": shape[2], "classes": classes}
    x = torch.rand(4, *shape)
    graphs: dict[str, str] = {}
    for seed in range(20):
        instance = space.instantiate(space.sample(seed), args=args)
        space.check(instance, x)  # raises InvalidArchitectureError naming the node that does not fit
        assert instance.module(x).shape == (4, classes)
        graphs[typed(instance.record.choices)] = instance.record.graph_key
    assert len(set(graphs.values())) == len(graphs), "two different architectures gave the same graph"


def test_a_block_beyond_its_stages_depth_has_no_decisions(examples):
    space = template(examples, "mobilenet_blocks").model_space()
    later_blocks = {"kernel0_1", "expand0_1", "kernel0_2", "expand0_2"}
    assert later_blocks <= set(space.decisions())
    shallow = {**space.defaults(), "depth0": 1}
    one = space.instantiate({**shallow, "kernel0_1": 3, "expand0_2": 3}, device="meta").record
    other = space.instantiate({**shallow, "kernel0_1": 7, "expand0_2": 6}, device="meta").record
    assert not later_blocks & set(one.choices)
    assert one.graph_key == other.graph_key
    deep = space.instantiate({**shallow, "depth0": 3, "kernel0_1": 3}, device="meta").record
    wider = space.instantiate({**shallow, "depth0": 3, "kernel0_1": 7}, device="meta").record
    assert later_blocks <= set(deep.choices)
    assert len({one.graph_key, deep.graph_key, wider.graph_key}) == 3


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", TEMPLATES)
def test_every_strategy_searches_every_space(examples, name, strategy):
    """enas too: its controller takes each categorical knob as a position, no ArchKnob needed. (An
    ENAS *job* also needs the SKIP_TRAIN policy, which these templates do not declare.)"""
    cls = template(examples, name)
    space = cls.model_space()
    config = validate_knob_config(cls.get_knob_config())
    proposals = run_search(
        make_strategy(strategy, config, seed=0), 6, score=lambda knobs: parameter_count(space, knobs)
    )
    for knobs in proposals:
        validated = trial_knobs(config, knobs)
        space.instantiate(choices_of(space, validated), device="meta")  # every proposal is a point of the space
    assert len({typed(choices_of(space, k)) for k in proposals}) > 1


@pytest.fixture(scope="module")
def bar_images(tmp_path_factory) -> tuple[str, str]:
    """12x12 images of three classes; 300 to train, as a network of batch norms needs a few dozen
    steps before its running statistics serve evaluation."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("bars")
    return str(write_image_files(folder / "train.zip", *bars(rng, 300))), str(
        write_image_files(folder / "val.zip", *bars(rng, 60))
    )


def test_an_instance_trains_scores_and_round_trips_through_the_template(examples, bar_images):
    cls = template(examples, "enas_macro")
    config = validate_knob_config(cls.get_knob_config())
    choices = {"op0": "conv5", "op1": "sep3", "op2": "max", "skip2_0": "layers_2_skip_from_0"}
    model = cls(**trial_knobs(config, {**cls.model_space().defaults(), **choices}))
    model.train(bar_images[0], seed=0)
    assert model.record is not None and set(model.record.changed) >= {"layers_0_op", "layers_1_op", "layers_2_op"}
    score = model.evaluate(bar_images[1])
    assert 0.8 <= score <= 1.0  # chance is a third
    fresh = cls(**model.knobs)
    fresh.load_parameters(params_from_bytes(params_to_bytes(model.dump_parameters())))
    assert fresh.evaluate(bar_images[1]) == score
    queries = np.zeros((2, 12, 12), int).tolist()
    assert fresh.predict(queries) == model.predict(queries)
