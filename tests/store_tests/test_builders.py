"""The builders, run on the real data: Debian's dataset-fashion-mnist and scikit-learn's bundled sets."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from baobab.exceptions import DatasetError
from baobab.store import (
    DIGITS_CLASSES,
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_SOURCE,
    TABULAR_DATASETS,
    BuiltDataset,
    build_digits,
    build_fashion_mnist,
    build_tabular,
    check_compatible,
    read_image_files,
    read_tabular,
)

SOURCE = Path(FASHION_MNIST_SOURCE)
IDX_FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]


@pytest.fixture(scope="module")
def fashion_mnist_200(tmp_path_factory: pytest.TempPathFactory) -> BuiltDataset:
    """Fashion-MNIST cut to 200 train+val images (about half a second, most of it gunzip)."""
    return build_fashion_mnist(tmp_path_factory.mktemp("fashion-mnist"), limit=200, seed=0)


@pytest.fixture(scope="module")
def source_training_set() -> dict[bytes, int]:
    """Every training image of the source, as raw bytes -> label (a plain reading of the IDX layout)."""
    with gzip.open(SOURCE / "train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28 * 28)
    with gzip.open(SOURCE / "train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return {image.tobytes(): int(label) for image, label in zip(images, labels, strict=True)}


def test_fashion_mnist_limit_splits_and_stratifies(fashion_mnist_200: BuiltDataset) -> None:
    splits = {s.name: s for s in fashion_mnist_200.splits}
    assert [(s.name, s.path.name, s.rows, s.classes) for s in fashion_mnist_200.splits] == [
        ("train", "train.zip", 180, 10),
        ("val", "val.zip", 20, 10),
        ("test", "test.zip", 33, 10),  # 200 scaled by 10,000 / 60,000
    ]
    assert fashion_mnist_200.class_names == FASHION_MNIST_CLASSES
    train, val = read_image_files(splits["train"].path), read_image_files(splits["val"].path)
    test = read_image_files(splits["test"].path)
    for ds, rows in ((train, 180), (val, 20), (test, 33)):
        assert ds.images.shape == (rows, 28, 28) and ds.images.dtype == np.uint8
        assert ds.num_classes == 10
    # Stratified: the source is balanced, so every class gets its share exactly.
    assert np.bincount(train.labels).tolist() == [18] * 10
    assert np.bincount(val.labels).tolist() == [2] * 10
    check_compatible(train, val)
    check_compatible(train, test)
    assert sorted(p.name for p in splits["train"].path.parent.iterdir()) == ["test.zip", "train.zip", "val.zip"]


def test_fashion_mnist_images_keep_their_source_labels(
    fashion_mnist_200: BuiltDataset, source_training_set: dict[bytes, int]
) -> None:
    train, val = (read_image_files(s.path) for s in fashion_mnist_200.splits[:2])
    train_keys = {image.tobytes() for image in train.images}
    val_keys = {image.tobytes() for image in val.images}
    assert not train_keys & val_keys
    for ds in (train, val):
        for image, label in zip(ds.images, ds.labels, strict=True):
            assert source_training_set[image.tobytes()] == label


def test_fashion_mnist_is_seeded(tmp_path: Path, fashion_mnist_200: BuiltDataset) -> None:
    again = build_fashion_mnist(tmp_path / "again", limit=200, seed=0)
    for first, second in zip(fashion_mnist_200.splits, again.splits, strict=True):
        np.testing.assert_array_equal(read_image_files(first.path).images, read_image_files(second.path).images)
    other = build_fashion_mnist(tmp_path / "other", limit=200, seed=1, val_fraction=0.25)
    assert [s.rows for s in other.splits] == [150, 50, 33]
    assert not np.array_equal(
        read_image_files(other.splits[2].path).images, read_image_files(fashion_mnist_200.splits[2].path).images
    )


def test_fashion_mnist_missing_source(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="install the Debian package dataset-fashion-mnist or point the source") as e:
        build_fashion_mnist(tmp_path / "out", source=tmp_path / "absent")
    assert e.value.file == str(tmp_path / "absent" / "train-images-idx3-ubyte.gz")
    assert not (tmp_path / "out").exists()


def copy_source(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in IDX_FILES:
        (source / name).symlink_to(SOURCE / name)
    return source


def test_fashion_mnist_bad_magic_number(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    (source / IDX_FILES[0]).unlink()
    shutil.copy(SOURCE / IDX_FILES[1], source / IDX_FILES[0])  # a labels file where the images should be
    with pytest.raises(DatasetError, match=r"train-images-idx3-ubyte.gz: magic number 00000801 is not 00000803"):
        build_fashion_mnist(tmp_path / "out", source=source)


def test_fashion_mnist_truncated_idx(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    with gzip.open(SOURCE / IDX_FILES[3]) as f:
        data = f.read()
    (source / IDX_FILES[3]).unlink()
    with gzip.open(source / IDX_FILES[3], "wb") as f:
        f.write(data[:-5])
    with pytest.raises(DatasetError, match=r"t10k-labels.*holds 9995 bytes of data, its header promises 10000"):
        build_fashion_mnist(tmp_path / "out", source=source)


def test_fashion_mnist_not_gzip(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    (source / IDX_FILES[1]).unlink()
    (source / IDX_FILES[1]).write_bytes(b"plain bytes")
    with pytest.raises(DatasetError, match=r"train-labels-idx1-ubyte.gz: not a readable gzip file"):
        build_fashion_mnist(tmp_path / "out", source=source)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"limit": 50}, r"limit 50 with val_fraction 0.1 gives 45 training and 5 validation images"),
        ({"limit": 0}, "limit must be a positive number"),
        ({"val_fraction": 1.0}, "val_fraction must lie strictly between 0 and 1"),
    ],
)
def test_fashion_mnist_bad_sizes(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_fashion_mnist(tmp_path, **kwargs)


@pytest.mark.parametrize(
    "name, size, features, classes",
    [("breast_cancer", 569, 30, 2), ("wine", 178, 13, 3), ("iris", 150, 4, 3), ("digits", 1797, 64, 10)],
)
def test_tabular_classification_sets(tmp_path: Path, name: str, size: int, features: int, classes: int) -> None:
    built = build_tabular(name, tmp_path, seed=0)
    assert [s.path.name for s in built.splits] == ["train.csv", "val.csv", "test.csv"]
    assert sum(s.rows for s in built.splits) == size
    assert [s.classes for s in built.splits] == [classes] * 3
    assert built.class_names is not None and len(built.class_names) == classes
    train, val, test = (read_tabular(s.path, target="target") for s in built.splits)
    assert train.features.shape == (built.splits[0].rows, features)
    assert train.target.dtype == np.int64 and train.classes is None
    assert abs(len(train.target) / size - 0.6) < 0.01
    check_compatible(train, val)
    check_compatible(train, test)
    # Stratified: each split keeps the class proportions of the whole set to within a row or so.
    whole = np.bincount(np.concatenate([train.target, val.target, test.target])) / size
    for ds in (train, val, test):
        assert np.abs(np.bincount(ds.target, minlength=classes) / len(ds.target) - whole).max() < 0.02


def test_tabular_regression_set(tmp_path: Path) -> None:
    built = build_tabular("diabetes", tmp_path, seed=0)
    assert [(s.rows, s.classes) for s in built.splits] == [(264, None), (89, None), (89, None)]
    assert built.class_names is None
    train = read_tabular(built.splits[0].path, target="target")
    assert train.target.dtype == np.float64
    assert train.feature_names[:3] == ("age", "sex", "bmi")


def test_tabular_is_seeded(tmp_path: Path) -> None:
    a, b, c = (build_tabular("iris", tmp_path / d, seed=s) for d, s in (("a", 3), ("b", 3), ("c", 4)))
    read = [pd.read_csv(built.splits[0].path) for built in (a, b, c)]
    pd.testing.assert_frame_equal(read[0], read[1])
    assert not read[0].equals(read[2])


def test_tabular_unknown_name(tmp_path: Path) -> None:
    assert TABULAR_DATASETS == ("breast_cancer", "diabetes", "digits", "iris", "wine")
    with pytest.raises(ValueError, match="unknown tabular dataset 'mnist'; choose one of breast_cancer, diabetes,"):
        build_tabular("mnist", tmp_path)


def test_digits_as_images(tmp_path: Path) -> None:
    import sklearn.datasets

    built = build_digits(tmp_path, seed=0)
    assert [(s.name, s.path.name, s.rows, s.classes) for s in built.splits] == [
        ("train", "train.zip", 1077, 10),
        ("val", "val.zip", 360, 10),
        ("test", "test.zip", 360, 10),
    ]
    assert built.class_names == DIGITS_CLASSES == tuple("0123456789")
    train, val, test = (read_image_files(s.path) for s in built.splits)
    for ds, split in zip((train, val, test), built.splits, strict=True):
        assert ds.images.shape == (split.rows, 8, 8) and ds.images.dtype == np.uint8
        assert ds.num_classes == 10
    check_compatible(train, val)
    check_compatible(train, test)
    # Each image is one of the source's, scaled from 0..16 to 0..255 and labelled with its digit; none twice.
    bunch = sklearn.datasets.load_digits()
    source = {
        np.rint(image * 255 / 16).astype(np.uint8).tobytes(): int(label)
        for image, label in zip(bunch.images, bunch.target, strict=True)
    }
    seen = [image.tobytes() for ds in (train, val, test) for image in ds.images]
    assert all(
        source[key] == label
        for ds in (train, val, test)
        for key, label in zip((i.tobytes() for i in ds.images), ds.labels, strict=True)
    )
    assert len(set(seen)) == len(seen) == len(source)
    assert max(ds.images.max() for ds in (train, val, test)) == 255
    # Stratified: each split holds every digit in the proportion of the whole set, to within a row or so.
    whole = np.bincount(bunch.target) / len(bunch.target)
    for ds in (train, val, test):
        assert np.abs(np.bincount(ds.labels, minlength=10) / len(ds.labels) - whole).max() < 0.01
    again = build_digits(tmp_path / "again", seed=0)
    other = build_digits(tmp_path / "other", seed=1)
    np.testing.assert_array_equal(read_image_files(again.splits[2].path).images, test.images)
    assert not np.array_equal(read_image_files(other.splits[2].path).images, test.images)
