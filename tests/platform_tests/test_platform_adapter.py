"""Adapters on a frozen zoo base through ``baobab up``: a pre-trained TorchCnn registered in the zoo, a job of
TorchAdapter trials naming it (``options.base_model``) trained fused, and one of them served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baobab.model import TrialContext, load_template, trial_context
from baobab.store import params_from_bytes, write_image_files
from baobab.zoo import register_model

EXAMPLES = Path(__file__).parents[2] / "examples" / "models"
TRIALS = 3


def _quadrants(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """12x12 grey noise with a bright quadrant: the quadrant is the class (four)."""
    labels = rng.integers(0, 4, count)
    pixels = rng.integers(0, 60, (count, 12, 12)).astype(np.uint8)
    for image, label in zip(pixels, labels, strict=True):
        row, col = divmod(int(label), 2)
        image[row * 6 : row * 6 + 6, col * 6 : col * 6 + 6] += 150
    return pixels, labels


def _pretrained_cnn(train: Path) -> Any:
    """A TorchCnn of the adapter's base architecture (its base_* knobs' defaults), trained here briefly."""
    cnn = load_template(EXAMPLES / "torch_cnn.py", "TorchCnn")(
        learning_rate=3e-3, channels=16, depth=2, kernel_size=3, dropout=0.0, epochs=2, batch_size=32,
        early_stop=False, quick_eval=False, downscale=False, share_params=False,
    )  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with trial_context(TrialContext()):
            cnn.train(str(train), seed=3)
    finally:
        torch.set_num_threads(threads)
    return cnn


def test_adapter_trials_train_fused_on_one_zoo_base_and_serve(
    start_platform: Callable[[], Any], tmp_path: Path
) -> None:
    rng = np.random.default_rng(4)
    train_zip = write_image_files(tmp_path / "train.zip", *_quadrants(rng, 120))
    val_zip = write_image_files(tmp_path / "val.zip", *_quadrants(rng, 40))
    cnn = _pretrained_cnn(train_zip)
    client = start_platform().client

    zoo_model = register_model(
        client, cnn.module, cnn.example_input, score=cnn.evaluate(str(val_zip)), task="IMAGE_CLASSIFICATION"
    )
    zoo_params = params_from_bytes(client.download_zoo_params(zoo_model["id"]))
    # The two conv blocks: the CNN's Sequential indices 0 to 7 (8 to 10 are its classifier).
    base = {key: value for key, value in zoo_params.items() if int(key.split(".")[1]) < 8}
    assert base and all(np.array_equal(value, cnn.dump_parameters()[key]) for key, value in base.items())

    train = client.create_dataset("quadrants train", train_zip, format="IMAGE_FILES")
    val = client.create_dataset("quadrants val", val_zip, format="IMAGE_FILES")
    model = client.create_model(EXAMPLES / "torch_adapter.py", task="IMAGE_CLASSIFICATION", class_name="TorchAdapter")
    job = client.create_train_job(
        "adapters",
        "IMAGE_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
        options={"base_model": zoo_model["id"], "fusion": {"max_group": 3}},
        strategy="random",
    )
    job = client.wait_for_train_job("adapters", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job

    trials = client.get_trials("adapters", job["app_version"])["trials"]
    assert [t["status"] for t in trials] == ["COMPLETED"] * TRIALS, trials
    groups = {(t["fused_group"] or {}).get("id") for t in trials}
    assert len(groups) == 1 and None not in groups, trials  # one group of three, one process
    assert all(t["fused_group"]["size"] == TRIALS for t in trials)
    assert len({t["knobs"]["learning_rate"] for t in trials}) == TRIALS  # searched per member
    for trial in trials:
        logs = [line["line"] for line in client.get_trial_logs(trial["id"])]
        assert f"base: 14 tensors of zoo model {zoo_model['id']}, frozen" in logs, logs
        assert not [line for line in logs if line.startswith("not fused")], logs
        params = params_from_bytes(client.download_trial_params(trial["id"], tmp_path).read_bytes())
        for key, value in base.items():  # module.<i>.* of the CNN is module.base.layers.<i>.* of the adapter
            np.testing.assert_array_equal(params["module.base.layers." + key[len("module.") :]], value, err_msg=key)
        assert params["train_arg.base_model"] == zoo_model["id"]

    inference = client.create_inference_job("adapters", job["app_version"], k=1)
    served = client.wait_for_inference_job(inference["id"], timeout=120)
    assert served["status"] == "RUNNING"
    queries = [image.tolist() for image in _quadrants(np.random.default_rng(5), 4)[0]]
    answer = client.predict(queries, predictor_url=served["predictor_url"], api_key=inference["api_key"])
    predictions = answer["predictions"]
    assert len(predictions) == 4 and all(len(p) == 4 and abs(sum(p) - 1) < 1e-4 for p in predictions), predictions
    client.stop_inference_job(inference["id"])
