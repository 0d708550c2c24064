"""The NAS-Bench-201 space example: six edge decisions, instances that are the cells their
architecture strings name, and a template that trains on images."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from baobab.model import CategoricalKnob, FixedKnob, check_template, validate_knobs
from baobab.store import write_image_files

torch = pytest.importorskip("torch")
nn = torch.nn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spaces" / "nb201.py"
#: NAS-Bench-201's architecture strings, read as its users parse them: node by node, each
#: incoming edge's operation and source node.
ARCH = re.compile(r"\|(\w+)~0\|\+\|(\w+)~0\|(\w+)~1\|\+\|(\w+)~0\|(\w+)~1\|(\w+)~2\|")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example imported the way the platform does: as a single file."""
    spec = importlib.util.spec_from_file_location("example_nb201", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def operation(example: ModuleType, module: nn.Module) -> str:
    """The NAS-Bench-201 name of the module an instance holds on an edge."""
    if isinstance(module, example.Zero):
        return "none"
    if isinstance(module, nn.Identity):
        return "skip_connect"
    if isinstance(module, nn.AvgPool2d):
        return "avg_pool_3x3"
    assert isinstance(module, example.ReLUConvBN), type(module)
    return f"nor_conv_{module[1].kernel_size[0]}x{module[1].kernel_size[0]}"


def test_the_decisions_are_the_six_edges_of_five_operations(example: ModuleType) -> None:
    config = check_template(example.Nb201Cells)
    edges = [f"edge_{i}_{j}" for i, j in example.EDGES]
    assert [name for name in config if name.startswith("edge_")] == edges
    assert all(config[name] == CategoricalKnob(list(example.OPS)) for name in edges)
    assert example.Nb201Cells.model_space().decisions().keys() == set(edges)


@pytest.mark.parametrize("seed", range(4))
def test_the_arch_string_names_the_cell_every_cell_of_the_instance_is(example: ModuleType, seed: int) -> None:
    space = example.make_space(cells=2)
    instance = space.instantiate(space.sample(seed=seed), device="meta")
    ops = ARCH.fullmatch(example.arch_string(instance.record.choices)).groups()
    cells = [m for m in instance.module.cells.children() if hasattr(m, "edge_0_1")]
    assert len(cells) == 6
    for cell in cells:
        built = [operation(example, cell.get_submodule(f"edge_{i}_{j}")) for i, j in example.EDGES]
        assert tuple(built) == ops


def test_the_arch_string_of_knobs_and_a_missing_decision(example: ModuleType) -> None:
    knobs = dict(zip([f"edge_{i}_{j}" for i, j in example.EDGES], example.OPS + ("skip_connect",), strict=True))
    assert ARCH.fullmatch(example.arch_string(knobs)).groups() == (*example.OPS, "skip_connect")
    del knobs["edge_1_3"]
    with pytest.raises(ValueError, match="edge_1_3"):
        example.arch_string(knobs)


@pytest.mark.parametrize(("channels", "size"), [(1, 28), (3, 15)])
def test_instances_run_on_images_of_any_size(example: ModuleType, channels: int, size: int) -> None:
    space = example.make_space()
    for seed in range(3):
        instance = space.instantiate(space.sample(seed=seed), args={"in_channels": channels, "classes": 7})
        space.check(instance, torch.zeros(2, channels, size, size))
        assert instance.module(torch.zeros(2, channels, size, size)).shape == (2, 7)


@pytest.mark.parametrize("downscale", [False, True])
def test_the_template_trains_and_reloads(example: ModuleType, tmp_path: Path, downscale: bool) -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 60)
    images = rng.integers(0, 60, (60, 12, 12))
    for image, label in zip(images, labels, strict=True):
        image[4 * label : 4 * label + 4] += 180
    data = write_image_files(tmp_path / "bars.zip", images.astype(np.uint8), labels)
    template = example.Nb201Cells
    config = check_template(template)
    choices = {"edge_0_1": "nor_conv_3x3", "edge_0_3": "avg_pool_3x3", "edge_2_3": "none"}
    fixed = {name: knob.value for name, knob in config.items() if isinstance(knob, FixedKnob)}
    off = {"early_stop": False, "quick_eval": False, "downscale": downscale, "share_params": False}
    knobs = validate_knobs(config, {**template.model_space().defaults(), **choices, **fixed, **off})
    model = template(**knobs)
    model.train(str(data))
    assert ARCH.fullmatch(example.arch_string(model.record.choices)).group(1) == "nor_conv_3x3"
    stem = model.module.get_submodule("stem.0")
    assert stem.out_channels == (example.CHANNELS // 2 if downscale else example.CHANNELS)
    predictions = np.array(model.predict(list(images[:5].astype(np.uint8))))
    assert predictions.shape == (5, 3)
    fresh = template(**knobs)
    fresh.load_parameters(model.dump_parameters())
    np.testing.assert_allclose(np.array(fresh.predict(list(images[:5].astype(np.uint8)))), predictions, atol=1e-6)
