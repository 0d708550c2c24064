"""Stacked inference: trained TorchModels of one structure answer together as each answers alone.

Tolerance: probabilities from the stacked pass and from each member's own forward
differed by at most 3e-8 in these tests (float32, one torch thread); the checks allow
1e-6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from baobab.model import (
    FloatKnob,
    StackedPredictor,
    TorchModel,
    largest_stack,
    load_template,
    stack_refusal,
)
from baobab.store import write_image_files, write_tabular

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
Cnn = load_template(EXAMPLES / "torch_cnn.py", "TorchCnn")
Mlp = load_template(EXAMPLES / "torch_mlp.py", "TorchMlp")
POLICIES = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}
ATOL = 1e-6


class BrightCnn(Cnn):
    """The CNN example, whose preprocessing depends on a knob: members see different inputs."""

    @staticmethod
    def get_knob_config():
        return {**Cnn.get_knob_config(), "gain": FloatKnob(0.5, 2.0)}

    def preprocess(self, inputs: np.ndarray) -> torch.Tensor:
        return super().preprocess(inputs) * self.knobs["gain"]


class VotingCnn(Cnn):
    """Overrides predict: what it answers is not what a stacked pass computes."""

    def predict(self, queries: list[Any]) -> list[Any]:
        return [int(np.argmax(p)) for p in super().predict(queries)]


#: A template that is not a TorchModel.
Centroid = load_template(Path(__file__).parent / "templates" / "tiny_models.py", "Centroid")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[str, list[list[list[int]]]]:
    """10x10 grey noise with a bright quadrant (the class), and a few queries like them."""
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, 120)
    pixels = rng.integers(0, 60, (120, 10, 10)).astype(np.uint8)
    for image, label in zip(pixels, labels, strict=True):
        row, col = divmod(int(label), 2)
        image[row * 5 : row * 5 + 5, col * 5 : col * 5 + 5] += 150
    path = write_image_files(tmp_path_factory.mktemp("images") / "train.zip", pixels, labels)
    return str(path), pixels[:9].astype(int).tolist()


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[str, list[list[float]]]:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 150)
    x = rng.normal(0, 1, (150, 4))
    x[:, 0] += 2.5 * (labels == 1)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(4)])
    frame["target"] = np.array(["ash", "birch", "cedar"])[labels]
    return str(write_tabular(tmp_path_factory.mktemp("table") / "train.csv", frame)), x[:7].tolist()


def trained(cls: type[TorchModel], path: str, seed: int, **knobs: Any) -> TorchModel:
    """A model trained on ``path``, then loaded afresh from its parameters (as an inference worker loads it)."""
    model = cls(**knobs)
    model.train(path, seed=seed)
    loaded = cls(**knobs)
    loaded.load_parameters(model.dump_parameters())
    return loaded


def cnn_knobs(**overrides: Any) -> dict[str, Any]:
    knobs = dict(learning_rate=1e-2, channels=4, depth=2, kernel_size=3, dropout=0.0, epochs=1, batch_size=32)
    return {**knobs, **POLICIES, **overrides}


def assert_close(stacked: list[Any], own: list[Any]) -> None:
    np.testing.assert_allclose(np.asarray(stacked), np.asarray(own), rtol=0, atol=ATOL)


def test_cnn_members_answer_stacked_as_each_answers_alone(images) -> None:
    path, queries = images
    members = [
        trained(Cnn, path, seed, **cnn_knobs(learning_rate=lr, dropout=dropout))
        for seed, lr, dropout in ((1, 1e-2, 0.0), (2, 3e-3, 0.3), (3, 2e-2, 0.1))
    ]
    own = [m.predict(queries) for m in members]
    # The members differ (else equal answers would prove nothing).
    assert np.abs(np.asarray(own[0]) - np.asarray(own[1])).max() > 1e-3
    stack = StackedPredictor(members)
    answers = stack.predict(queries)
    assert len(answers) == 3
    for stacked, alone in zip(answers, own, strict=True):
        assert_close(stacked, alone)
    # Each member's module, its BatchNorm folded into the convolution before it, holds views of its
    # rows of the stack: it still answers alone, as before up to rounding.
    for member, alone in zip(members, own, strict=True):
        assert not any(isinstance(layer, torch.nn.BatchNorm2d) for layer in member.module.modules())
        assert_close(member.predict(queries), alone)
    assert stack.predict([]) == [[], [], []]


def test_members_whose_preprocessing_differs_get_their_own_inputs(images) -> None:
    path, queries = images
    members = [trained(BrightCnn, path, seed, **cnn_knobs(gain=gain)) for seed, gain in ((1, 1.0), (2, 1.7))]
    own = [m.predict(queries) for m in members]
    for stacked, alone in zip(StackedPredictor(members).predict(queries), own, strict=True):
        assert_close(stacked, alone)


def test_each_member_postprocesses_its_own_outputs(table) -> None:
    """The MLP example answers labels by its own class order: stacked, each keeps its own."""
    path, queries = table
    knobs = dict(hidden_size=16, hidden_layers=2, weight_decay=1e-3, epochs=2, batch_size=32, **POLICIES)
    members = [trained(Mlp, path, seed, learning_rate=1e-2, dropout=0.1 * seed, **knobs) for seed in (1, 2, 3)]
    answers = StackedPredictor(members).predict(queries)
    assert answers == [m.predict(queries) for m in members]
    assert {label for answer in answers for label in answer} <= {"ash", "birch", "cedar"}


def test_the_largest_set_of_one_structure_is_stacked_and_the_others_are_told_why(images, table) -> None:
    path, _ = images
    odd = trained(Cnn, path, 1, **cnn_knobs(channels=8))
    same = [trained(Cnn, path, seed, **cnn_knobs()) for seed in (2, 3)]
    other_kernel = trained(Cnn, path, 4, **cnn_knobs(kernel_size=5))
    centroid = Centroid(shrink=0.0, norm="l1", kind="centroid", quick=False)
    kept, apart = largest_stack([odd, *same, other_kernel, centroid])
    assert kept == [1, 2]
    assert set(apart) == {0, 3, 4}
    assert apart[0].startswith("its parameters differ from the stacked members': '0.weight (8, 1, 3, 3)")
    assert "(4, 1, 5, 5)" in apart[3]
    assert apart[4] == "Centroid is not a TorchModel; only TorchModel templates answer stacked"
    # Of sets of one size, the one holding the best (first) model.
    kept, apart = largest_stack([same[0], odd])
    assert kept == [0] and list(apart) == [1]
    with pytest.raises(ValueError, match="cannot answer stacked"):
        StackedPredictor([odd, *same])


def test_templates_that_cannot_answer_stacked_say_why() -> None:
    assert stack_refusal(Cnn) is None
    assert stack_refusal(Centroid) == "Centroid is not a TorchModel; only TorchModel templates answer stacked"
    assert stack_refusal(VotingCnn) == "VotingCnn overrides predict(), which a stacked forward pass would skip"
    unloaded = Cnn(**cnn_knobs())
    assert largest_stack([unloaded]) == ([], {0: "it has no module: load its parameters first"})
