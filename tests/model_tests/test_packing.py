"""profile_fusion: how many stacked copies of a trial's model one slot trains fastest, and why it stopped.

The rates themselves depend on the machine; these tests check what does not: which sizes
are measured, the choice among them, and each reason the sizes stop or the model trains
alone.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baobab.model import FixedKnob, FloatKnob, TorchModel, TrialContext, profile_fusion
from baobab.model._packing import PAYS, choose_size


class Small(TorchModel):
    """A 16-32-3 MLP on an ``.npz`` of ``x`` and ``y``; ``optimizer`` picks make_optimizer's class."""

    @staticmethod
    def get_knob_config():
        return {"learning_rate": FloatKnob(1e-3, 1e-1), "epochs": FixedKnob(2), "batch_size": FixedKnob(32)}

    def build_module(self, downscale):
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], 32), torch.nn.ReLU(), torch.nn.Linear(32, self.output_size)
        )

    def load_data(self, dataset_path):
        if self.knobs.get("broken"):
            raise RuntimeError("no such column: pixels")
        with np.load(dataset_path) as data:
            return data["x"], data["y"]

    def make_optimizer(self, params):
        if self.knobs.get("optimizer") == "rmsprop":
            return torch.optim.RMSprop(params, lr=self.knobs["learning_rate"])
        return super().make_optimizer(params)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("packing") / "train.npz"
    np.savez(path, x=rng.normal(size=(512, 16)).astype(np.float32), y=rng.integers(0, 3, 512))
    return str(path)


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_sizes_double_up_to_the_largest_asked_and_the_choice_is_among_them(data: str) -> None:
    context = TrialContext()
    profile = profile_fusion(Small(learning_rate=0.01), data, max_group=6, context=context, budget_s=30)
    assert set(profile.samples_per_s) == {1, 2, 4, 6} and profile.reason is None  # no stop below 16
    assert all(rate > 0 for rate in profile.samples_per_s.values())
    assert profile.best == choose_size(profile.samples_per_s) and profile.seconds > 0
    assert context.metrics == []  # measuring reports nothing, and trains no epoch
    assert profile.to_json()["samples_per_s"].keys() == {"1", "2", "4", "6"}


def test_a_size_is_chosen_only_where_it_pays_and_the_smallest_near_the_top() -> None:
    assert choose_size({1: 100.0, 2: 105.0, 4: 200.0, 8: 205.0}) == 4  # 8 is within 5% of itself: 4 is too
    assert choose_size({1: 100.0, 2: 100.0 * PAYS - 1, 4: 90.0}) == 1  # nothing beats alone by the margin
    assert choose_size({1: 100.0, 2: 300.0, 4: 250.0}) == 2
    assert choose_size({1: 100.0}) == 1


def test_a_stack_over_the_memory_bound_is_not_measured(data: str) -> None:
    profile = profile_fusion(Small(learning_rate=0.01), data, max_group=8, memory_bytes=10_000)
    assert set(profile.samples_per_s) == {1} and profile.best == 1
    assert profile.reason is not None and profile.reason.startswith("size 2 needs about")


def test_a_model_that_cannot_be_stacked_trains_alone_saying_why(data: str) -> None:
    profile = profile_fusion(Small(learning_rate=0.01, optimizer="rmsprop"), data, max_group=4)
    assert set(profile.samples_per_s) == {1} and profile.best == 1
    assert profile.reason is not None
    assert profile.reason.startswith("the model cannot be stacked: member 0: make_optimizer() gave RMSprop")


def test_a_model_that_fails_to_prepare_is_not_measured(data: str) -> None:
    profile = profile_fusion(Small(learning_rate=0.01, broken=True), data, max_group=4)
    assert profile.samples_per_s == {} and profile.best == 1
    failed = "train() before its loop raised RuntimeError: no such column: pixels"
    assert profile.reason == f"preparing the model failed: {failed}"


def test_the_time_budget_stops_the_sizes(data: str) -> None:
    profile = profile_fusion(Small(learning_rate=0.01), data, max_group=4, budget_s=0.0)
    assert set(profile.samples_per_s) == {1} and profile.best == 1
    assert profile.reason == "the profile's 0 s were spent before size 2"
