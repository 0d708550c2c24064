"""The example templates in examples/models: each trains, scores and round-trips its parameters."""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from baobab.model import BaseModel, validate_knob_config, validate_knobs
from baobab.store import FASHION_MNIST_SOURCE, build_fashion_mnist, params_from_bytes, params_to_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
OFF = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}

# example file -> (template class, knobs for a quick trial)
TEMPLATES = {
    "torch_cnn": (
        "TorchCnn",
        {
            "learning_rate": 3e-3, "channels": 8, "depth": 2, "kernel_size": 3, "dropout": 0.1,
            "epochs": 6, "batch_size": 32, **OFF,
        },
    ),
    "torch_mlp": (
        "TorchMlp",
        {
            "learning_rate": 1e-2, "hidden_size": 32, "hidden_layers": 2, "dropout": 0.0,
            "weight_decay": 1e-4, "epochs": 20, "batch_size": 16, **OFF,
        },
    ),
    "sklearn_tabular": (
        "SkTabularClassifier",
        {"C": 1.0, "class_weight": None, "fit_intercept": True, "max_iter": 500},
    ),
    "sklearn_images": ("SkImageClassifier", {"components": 16, "neighbors": 5, "weights": "distance"}),
}  # fmt: skip
IMAGE_TEMPLATES = ("torch_cnn", "sklearn_images")
TABULAR_TEMPLATES = ("torch_mlp", "sklearn_tabular")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Train on one thread: on a machine busy with other work, two threads spin-waiting
    for each other made a 2 s training take 20 s."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def load_template(name: str) -> type[BaseModel]:
    """Import an example the way the platform does: as a single file, not as a package."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, TEMPLATES[name][0])


def make(name: str, **overrides) -> BaseModel:
    template = load_template(name)
    knobs = validate_knobs(validate_knob_config(template.get_knob_config()), {**TEMPLATES[name][1], **overrides})
    return template(**knobs)


def write_image_zip(path: Path, images: np.ndarray, labels: np.ndarray) -> str:
    """An IMAGE_FILES zip: ``images.csv`` (``path,class``) and one PNG per image."""
    lines = ["path,class"]
    with zipfile.ZipFile(path, "w") as zf:
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            buf = io.BytesIO()
            Image.fromarray(image).save(buf, format="PNG")
            zf.writestr(f"img/{i}.png", buf.getvalue())
            lines.append(f"img/{i}.png,{label}")
        zf.writestr("images.csv", "\n".join(lines) + "\n")
    return str(path)


def bars(rng: np.random.Generator, count: int, channels: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """12x12 images of three classes: a bright bar across the top, middle or bottom, plus noise."""
    labels = rng.integers(0, 3, count)
    images = rng.integers(0, 60, (count, 12, 12))
    for image, label in zip(images, labels, strict=True):
        image[4 * label : 4 * label + 4] += 180
    images = images.astype(np.uint8)
    if channels:
        images = np.repeat(images[..., None], channels, axis=3)
    return images, labels


@pytest.fixture(scope="module")
def image_sets(tmp_path_factory) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("images")
    return write_image_zip(folder / "train.zip", *bars(rng, 90)), write_image_zip(folder / "val.zip", *bars(rng, 30))


def write_blobs_csv(path: Path, rng: np.random.Generator, count: int, target: str, names: list) -> str:
    """Three Gaussian blobs in four features; the label column holds ``names``."""
    labels = rng.integers(0, 3, count)
    centres = np.eye(3, 4) * 4
    features = centres[labels] + rng.normal(0, 0.7, (count, 4)) + np.array([0, 0, 0, 100])  # offset: must standardise
    frame = pd.DataFrame(features, columns=["a", "b", "c", "d"])
    frame.insert(2, target, [names[i] for i in labels])
    frame.to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module", params=["strings", "integers"])
def tabular_sets(request, tmp_path_factory) -> tuple[str, str, str, list]:
    """Train and validation CSVs, the target column and its label values."""
    rng = np.random.default_rng(1)
    folder = tmp_path_factory.mktemp("tabular")
    target, names = (
        ("species", ["setosa", "versicolor", "virginica"]) if request.param == "strings" else ("target", [0, 1, 2])
    )
    train = write_blobs_csv(folder / "train.csv", rng, 120, target, names)
    return train, write_blobs_csv(folder / "val.csv", rng, 45, target, names), target, names


def reloaded(model: BaseModel, name: str) -> BaseModel:
    """A fresh instance loaded with ``model``'s parameters through the stored bytes."""
    fresh = make(name)
    fresh.load_parameters(params_from_bytes(params_to_bytes(model.dump_parameters())))
    return fresh


@pytest.mark.parametrize("name", IMAGE_TEMPLATES)
def test_image_template_trains_scores_and_round_trips(name, image_sets):
    train, val = image_sets
    model = make(name)
    model.train(train)
    score = model.evaluate(val)
    assert isinstance(score, float) and 0.8 <= score <= 1.0
    queries = Image.open(zipfile.ZipFile(val).open("img/0.png"))
    queries = [np.asarray(queries).tolist(), np.zeros((12, 12), int).tolist()]
    predictions = model.predict(queries)
    assert len(predictions) == 2 and all(len(p) == 3 and abs(sum(p) - 1) < 1e-5 for p in predictions)
    json.dumps(predictions)
    fresh = reloaded(model, name)
    assert fresh.predict(queries) == predictions
    assert fresh.evaluate(val) == score


@pytest.mark.parametrize("name", TABULAR_TEMPLATES)
def test_tabular_template_trains_scores_and_round_trips(name, tabular_sets):
    train, val, target, names = tabular_sets
    model = make(name)
    model.train(train, target=target)
    score = model.evaluate(val)
    assert isinstance(score, float) and 0.9 <= score <= 1.0
    queries = pd.read_csv(val).drop(columns=target).to_numpy()[:6].tolist()
    predictions = model.predict(queries)
    assert predictions == pd.read_csv(val)[target][:6].tolist()  # decoded labels, as the CSV wrote them
    assert set(predictions) <= set(names)
    json.dumps(predictions)
    fresh = reloaded(model, name)
    assert fresh.predict(queries) == predictions
    assert fresh.evaluate(val) == score  # reads the validation set with the stored target and classes


def test_cnn_reads_colour_images(tmp_path):
    rng = np.random.default_rng(2)
    train = write_image_zip(tmp_path / "train.zip", *bars(rng, 40, channels=3))
    model = make("torch_cnn", epochs=3)
    model.train(train)
    assert model.input_shape == (3, 12, 12)
    assert len(model.predict([np.zeros((12, 12, 3), int).tolist()])[0]) == 3


def test_cnn_downscaled_is_smaller_and_reloads_at_its_size(image_sets):
    count = lambda m: sum(p.numel() for p in m.module.parameters())  # noqa: E731
    full, small = make("torch_cnn", epochs=3), make("torch_cnn", epochs=3, downscale=True)
    full.train(image_sets[0])
    small.train(image_sets[0])
    assert count(small) < count(full)
    assert count(reloaded(small, "torch_cnn")) == count(small)


@pytest.mark.skipif(not Path(FASHION_MNIST_SOURCE).is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_cnn_learns_fashion_mnist(tmp_path):
    built = {split.name: str(split.path) for split in build_fashion_mnist(tmp_path, limit=2000).splits}
    model = make("torch_cnn", channels=8, depth=1, epochs=3, batch_size=64)
    model.train(built["train"])
    assert model.evaluate(built["val"]) > 0.7  # chance is 0.1
