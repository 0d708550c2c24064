"""TorchModel: the platform-owned training loop and how it honours each policy."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from baobab.model import (
    FixedKnob,
    IntegerKnob,
    InterimMetric,
    PolicyKnob,
    TorchModel,
    TrialContext,
    trial_context,
)
from baobab.store import params_from_bytes, params_to_bytes

EPOCHS = 8
ROWS = 200


class Recorder(TorchModel):
    """A small MLP that records what the loop hands it."""

    @staticmethod
    def get_knob_config():
        return {
            "epochs": FixedKnob(EPOCHS),
            "batch_size": FixedKnob(16),
            "learning_rate": FixedKnob(0.05),
            "width": IntegerKnob(4, 64),
            "early_stop": PolicyKnob("EARLY_STOP"),
            "quick_eval": PolicyKnob("QUICK_EVAL"),
            "downscale": PolicyKnob("DOWNSCALE"),
            "share_params": PolicyKnob("SHARE_PARAMS"),
            "skip_train": PolicyKnob("SKIP_TRAIN"),
        }

    def __init__(self, **knobs):
        super().__init__(**knobs)
        self.scored_rows: list[int] = []
        self.state_before_training: dict[str, torch.Tensor] = {}

    def build_module(self, downscale):
        width = self.knobs["width"] // 4 if downscale else self.knobs["width"]
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, self.output_size),
        )

    def load_data(self, dataset_path):
        with np.load(dataset_path) as data:
            return data["x"], data["y"]

    def fit_module(self, module, inputs, targets):
        self.state_before_training = {k: v.clone() for k, v in module.state_dict().items()}

    def score(self, outputs, targets):
        self.scored_rows.append(len(targets))
        return super().score(outputs, targets)


def make_knobs(**overrides):
    knobs = {name: False for name in ("early_stop", "quick_eval", "downscale", "share_params", "skip_train")}
    knobs.update(epochs=EPOCHS, batch_size=16, learning_rate=0.05, width=32)
    knobs.update(overrides)
    return knobs


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> Path:
    """Three separable Gaussian blobs in four dimensions."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, ROWS)
    centres = np.array([[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0]], dtype=np.float32)
    x = (centres[y] + rng.normal(0, 0.5, (ROWS, 4))).astype(np.float32)
    path = tmp_path_factory.mktemp("blobs") / "blobs.npz"
    np.savez(path, x=x, y=y.astype(np.int64))
    return path


def train(path, *, shared_params=None, context=None, **knobs):
    model = Recorder(**make_knobs(**knobs))
    context = context or TrialContext()
    with trial_context(context):
        model.train(str(path), shared_params)
    return model, context


def test_trains_every_epoch_and_learns(blobs):
    model, context = train(blobs)
    assert [m.step for m in context.metrics] == list(range(EPOCHS))
    assert set(context.metrics[0].metrics) == {"loss", "train_score"}
    assert context.metrics[-1].metrics["loss"] < context.metrics[0].metrics["loss"]
    assert model.evaluate(str(blobs)) > 0.9


def test_early_stop_trains_a_quarter_of_the_epochs(blobs):
    _, context = train(blobs, early_stop=True)
    assert len(context.metrics) == EPOCHS // 4


def test_skip_train_trains_no_epoch(blobs):
    model, context = train(blobs, skip_train=True)
    assert context.metrics == []
    state = model.module.state_dict()
    assert all(torch.equal(state[k], v) for k, v in model.state_before_training.items())


def test_downscale_builds_a_smaller_module_that_reloads_at_its_size(blobs):
    full, _ = train(blobs, epochs=1)
    small, _ = train(blobs, epochs=1, downscale=True)
    count = lambda m: sum(p.numel() for p in m.module.parameters())  # noqa: E731
    assert count(small) < count(full)
    params = small.dump_parameters()
    assert params["downscaled"] is True
    # The platform rebuilds from the knobs alone, whatever the policy knobs say at serving time.
    fresh = Recorder(**make_knobs(epochs=1))
    fresh.load_parameters(params_from_bytes(params_to_bytes(params)))
    assert count(fresh) == count(small)


def test_quick_eval_scores_a_seeded_tenth_of_the_rows(blobs):
    full, _ = train(blobs, epochs=2)
    full.evaluate(str(blobs))
    assert full.scored_rows[-1] == ROWS
    quick = Recorder(**make_knobs(epochs=2, quick_eval=True))
    quick.load_parameters(full.dump_parameters())
    first = quick.evaluate(str(blobs))
    assert quick.scored_rows[-1] == math.ceil(ROWS * Recorder.quick_eval_fraction)
    assert quick.evaluate(str(blobs)) == first


def test_shared_params_are_loaded_before_training(blobs):
    donor, _ = train(blobs, epochs=2)
    shared = params_from_bytes(params_to_bytes(donor.dump_parameters()))
    model, context = train(blobs, shared_params=shared, share_params=True)
    assert context.logs == ["loaded 4 of 4 tensors from shared_params"]
    for name, tensor in model.state_before_training.items():
        np.testing.assert_array_equal(tensor.numpy(), shared["module." + name])
    assert len(context.metrics) == EPOCHS  # and then it trained on from there


def test_shared_params_load_only_what_matches_by_name_and_shape(blobs):
    donor, _ = train(blobs, epochs=1, width=16)
    model, context = train(blobs, shared_params=donor.dump_parameters(), width=32, skip_train=True)
    # Only the last bias (one per class) has the same shape at another width.
    assert context.logs == ["loaded 1 of 4 tensors from shared_params"]
    state = model.module.state_dict()
    np.testing.assert_array_equal(state["2.bias"].numpy(), donor.dump_parameters()["module.2.bias"])
    assert not np.array_equal(state["0.bias"][:16].numpy(), donor.dump_parameters()["module.0.bias"])


class StopAt:
    def __init__(self, step):
        self.step = step

    def on_report(self, metric: InterimMetric) -> bool:
        return metric.step >= self.step

    def on_log(self, message: str) -> None:
        pass


def test_a_stop_answer_to_a_report_ends_training(blobs):
    _, context = train(blobs, context=TrialContext(sink=StopAt(2)))
    assert [m.step for m in context.metrics] == [0, 1, 2]
    assert context.logs == ["stopped after epoch 2: stopped early by the platform"]


def test_a_stop_request_ends_training_between_batches(blobs):
    context = TrialContext()
    context.request_stop("time limit")
    model, _ = train(blobs, context=context)
    assert context.metrics == []
    assert context.logs == ["stopped in epoch 0: time limit"]
    assert model.predict([[0, 0, 0, 0]])  # the model is usable as it is


def test_training_is_seeded(blobs):
    def trained(seed):
        model = Recorder(**make_knobs(epochs=2))
        model.train(str(blobs), seed=seed)
        return model.dump_parameters()

    a, b, c = trained(1), trained(1), trained(2)
    for key in a:
        if key.startswith("module."):
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["module.0.weight"], c["module.0.weight"])


def test_without_a_seed_training_follows_the_seed_the_trial_runner_gave_torch(blobs):
    def trained(global_seed):
        torch.manual_seed(global_seed)
        model = Recorder(**make_knobs(epochs=1))
        model.train(str(blobs))
        return model.dump_parameters()

    a, b, c = trained(3), trained(3), trained(4)
    assert a["seed"] == b["seed"] == 3 and c["seed"] == 4
    np.testing.assert_array_equal(a["module.0.weight"], b["module.0.weight"])
    assert not np.array_equal(a["module.0.weight"], c["module.0.weight"])


def test_parameters_round_trip_with_identical_predictions(blobs):
    model = Recorder(**make_knobs(epochs=2))
    model.train(str(blobs), note="kept")
    params = params_from_bytes(params_to_bytes(model.dump_parameters()))
    fresh = Recorder(**make_knobs(epochs=2))
    fresh.load_parameters(params)
    queries = np.load(blobs)["x"][:5].tolist()
    predictions = fresh.predict(queries)
    assert predictions == model.predict(queries)
    assert fresh.train_args == {"note": "kept"}
    assert fresh.evaluate(str(blobs)) == model.evaluate(str(blobs))
    json.dumps(predictions)
    assert len(predictions) == 5 and all(len(p) == 3 and abs(sum(p) - 1) < 1e-5 for p in predictions)
    assert fresh.predict([]) == []


def test_parameters_that_do_not_fit_are_refused(blobs):
    model, _ = train(blobs, epochs=1, width=16)
    params = model.dump_parameters()
    with pytest.raises(ValueError, match="do not fit the module built from these knobs"):
        Recorder(**make_knobs(width=32)).load_parameters(params)
    del params["output_size"]
    with pytest.raises(ValueError, match="lack output_size"):
        Recorder(**make_knobs(width=16)).load_parameters(params)


def test_using_a_model_before_training_says_what_to_do():
    with pytest.raises(RuntimeError, match=r"no module yet; call train\(\) or load_parameters\(\)"):
        Recorder(**make_knobs()).predict([[0, 0, 0, 0]])


def test_mismatched_inputs_and_targets_are_refused(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, x=np.zeros((3, 4), np.float32), y=np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="3 inputs but 2 targets"):
        Recorder(**make_knobs()).train(str(path))


def test_importing_the_model_package_does_not_import_torch():
    code = "import sys, baobab.model; assert 'torch' not in sys.modules; baobab.model.TorchModel"
    subprocess.run([sys.executable, "-c", code], check=True)
