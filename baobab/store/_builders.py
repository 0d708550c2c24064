"""Dataset builders: public datasets that lie on this machine, turned into Baobab's formats.

Nothing here downloads. Fashion-MNIST comes from Debian's ``dataset-fashion-mnist``
package (gzipped IDX files); the tabular sets and the 8x8 digit images are the ones
scikit-learn ships inside its wheel. Every split is stratified on the class label and
seeded, so a build is reproducible. scikit-learn is imported inside the builders: importing ``baobab.store``
(the REST server does) should not pay for it.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from baobab.exceptions import DatasetError
from baobab.store._datasets import write_image_files, write_tabular

__all__ = [
    "DIGITS_CLASSES",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_SOURCE",
    "TABULAR_DATASETS",
    "BuiltDataset",
    "BuiltSplit",
    "build_digits",
    "build_fashion_mnist",
    "build_tabular",
]

FASHION_MNIST_SOURCE = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
# name -> (scikit-learn loader, whether the target is a class label)
_TABULAR_LOADERS = {
    "breast_cancer": ("load_breast_cancer", True),
    "diabetes": ("load_diabetes", False),
    "digits": ("load_digits", True),
    "iris": ("load_iris", True),
    "wine": ("load_wine", True),
}
TABULAR_DATASETS = tuple(_TABULAR_LOADERS)
DIGITS_CLASSES = tuple(str(digit) for digit in range(10))
_TABULAR_VAL_FRACTION = 0.2
_TABULAR_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class BuiltSplit:
    """One file a builder wrote: its path, its row count and how many classes occur in it."""

    name: str
    path: Path
    rows: int
    classes: int | None  # None for a regression target


@dataclass(frozen=True)
class BuiltDataset:
    """What a builder wrote: the train, val and test splits, and the class names."""

    splits: tuple[BuiltSplit, ...]
    class_names: tuple[str, ...] | None


def build_fashion_mnist(
    out: str | os.PathLike[str],
    *,
    limit: int | None = None,
    val_fraction: float = 0.1,
    source: str | os.PathLike[str] = FASHION_MNIST_SOURCE,
    seed: int = 0,
) -> BuiltDataset:
    """Write Fashion-MNIST as ``train.zip``, ``val.zip`` and ``test.zip`` (IMAGE_FILES, grayscale PNG).

    Args:
        out: the folder to write into (created if missing).
        limit: at most this many training plus validation images; the test set is cut
            in the same proportion as the original sets (60,000 to 10,000). None: all.
        val_fraction: the part of the training images held out for validation.
        source: the folder with the four gzipped IDX files of ``dataset-fashion-mnist``.
        seed: seeds the stratified subsampling and the train/val split.

    Raises:
        DatasetError: a source file is missing or is not a valid IDX file.
        ValueError: ``limit`` or ``val_fraction`` leave a split with fewer images than classes.
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of images, got {limit}")
    from sklearn.model_selection import train_test_split

    source = Path(source)
    for files in _FASHION_MNIST_FILES.values():
        for name in files:
            if not (source / name).is_file():
                raise DatasetError(
                    "Fashion-MNIST source file not found; install the Debian package dataset-fashion-mnist "
                    f"or point the source (--source) at a folder holding {', '.join(sorted(_all_idx_files()))}",
                    file=str(source / name),
                )
    train_images, train_labels = _read_idx_pair(source, *_FASHION_MNIST_FILES["train"])
    test_images, test_labels = _read_idx_pair(source, *_FASHION_MNIST_FILES["test"])
    num_classes = len(FASHION_MNIST_CLASSES)

    n_pool = len(train_labels) if limit is None else min(limit, len(train_labels))
    n_val = round(n_pool * val_fraction)
    n_test = len(test_labels)
    if limit is not None:
        n_test = min(n_test, max(num_classes, round(n_pool * len(test_labels) / len(train_labels))))
    if min(n_val, n_pool - n_val) < num_classes:
        raise ValueError(
            f"limit {n_pool} with val_fraction {val_fraction} gives {n_pool - n_val} training and {n_val} "
            f"validation images; each needs at least one per class ({num_classes})"
        )
    pool = _stratified_subset(train_labels, n_pool, seed)
    train_idx, val_idx = train_test_split(pool, test_size=n_val, stratify=train_labels[pool], random_state=seed)
    test_idx = _stratified_subset(test_labels, n_test, seed)

    out = _make_dir(out)
    splits = []
    for name, images, labels, idx in (
        ("train", train_images, train_labels, train_idx),
        ("val", train_images, train_labels, val_idx),
        ("test", test_images, test_labels, test_idx),
    ):
        idx = np.sort(idx)
        path = write_image_files(out / f"{name}.zip", images[idx], labels[idx])
        splits.append(BuiltSplit(name, path, len(idx), len(np.unique(labels[idx]))))
    return BuiltDataset(tuple(splits), FASHION_MNIST_CLASSES)


def _all_idx_files() -> list[str]:
    return [name for files in _FASHION_MNIST_FILES.values() for name in files]


def _read_idx_pair(source: Path, images_name: str, labels_name: str) -> tuple[np.ndarray, np.ndarray]:
    images = _read_idx(source / images_name, ndim=3)
    labels = _read_idx(source / labels_name, ndim=1)
    if len(images) != len(labels):
        raise DatasetError(
            f"{len(labels)} labels for {len(images)} images in {images_name}", file=str(source / labels_name)
        )
    return images, labels.astype(np.int64)


def _read_idx(path: Path, *, ndim: int) -> np.ndarray:
    """Parse a gzipped IDX file of unsigned bytes (magic 0x0000 08 <ndim>, big-endian dims)."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DatasetError(f"not a readable gzip file: {e}", file=str(path)) from None
    magic = bytes((0, 0, 0x08, ndim))
    if data[:4] != magic:
        raise DatasetError(
            f"magic number {data[:4].hex()} is not {magic.hex()} (an IDX file of unsigned bytes with {ndim} "
            "dimension(s))",
            file=str(path),
        )
    header = 4 + 4 * ndim
    dims = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if len(data) - header != math.prod(dims):
        raise DatasetError(
            f"holds {len(data) - header} bytes of data, its header promises {math.prod(dims)} for shape {dims}",
            file=str(path),
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def build_tabular(name: str, out: str | os.PathLike[str], *, seed: int = 0) -> BuiltDataset:
    """Write one of scikit-learn's bundled sets as ``train.csv``, ``val.csv`` and ``test.csv``.

    The target column is ``target``; the splits are 60/20/20, stratified for the
    classification sets. Class labels are written as integers; ``class_names`` maps them.

    Args:
        name: one of :data:`TABULAR_DATASETS`.
        out: the folder to write into (created if missing).
        seed: seeds the splits.

    Raises:
        ValueError: ``name`` is not one of :data:`TABULAR_DATASETS`.
    """
    if name not in _TABULAR_LOADERS:
        raise ValueError(f"unknown tabular dataset {name!r}; choose one of {', '.join(TABULAR_DATASETS)}")
    import sklearn.datasets

    loader, is_classification = _TABULAR_LOADERS[name]
    bunch = getattr(sklearn.datasets, loader)()
    frame = pd.DataFrame(bunch.data, columns=[str(c) for c in bunch.feature_names])
    frame["target"] = bunch.target.astype(np.int64 if is_classification else np.float64)
    parts = _three_way_split(len(frame), frame["target"].to_numpy() if is_classification else None, seed)

    out = _make_dir(out)
    splits = []
    for split_name, idx in parts.items():
        split = frame.iloc[idx]
        path = write_tabular(out / f"{split_name}.csv", split)
        classes = int(split["target"].nunique()) if is_classification else None
        splits.append(BuiltSplit(split_name, path, len(split), classes))
    class_names = tuple(str(c) for c in bunch.target_names) if is_classification else None
    return BuiltDataset(tuple(splits), class_names)


def build_digits(out: str | os.PathLike[str], *, seed: int = 0) -> BuiltDataset:
    """Write scikit-learn's bundled digits as ``train.zip``, ``val.zip`` and ``test.zip`` (IMAGE_FILES).

    The 1,797 handwritten digits are 8x8 grayscale images of 0..16; they are written as
    PNG of 0..255 (``round(value * 255 / 16)``), each labelled with its digit. The splits
    are 60/20/20 and stratified, as :func:`build_tabular` splits the same set's pixels.

    Args:
        out: the folder to write into (created if missing).
        seed: seeds the splits.
    """
    import sklearn.datasets

    bunch = sklearn.datasets.load_digits()
    images = np.rint(bunch.images * (255 / 16)).astype(np.uint8)
    labels = bunch.target.astype(np.int64)

    out = _make_dir(out)
    splits = []
    for name, idx in _three_way_split(len(labels), labels, seed).items():
        idx = np.sort(idx)
        path = write_image_files(out / f"{name}.zip", images[idx], labels[idx])
        splits.append(BuiltSplit(name, path, len(idx), len(np.unique(labels[idx]))))
    return BuiltDataset(tuple(splits), DIGITS_CLASSES)


def _three_way_split(n: int, labels: np.ndarray | None, seed: int) -> dict[str, np.ndarray]:
    """Row indices of the train, val and test splits (60/20/20), stratified on ``labels`` when given."""
    from sklearn.model_selection import train_test_split

    rest, test = train_test_split(np.arange(n), test_size=_TABULAR_TEST_FRACTION, stratify=labels, random_state=seed)
    val_size = _TABULAR_VAL_FRACTION / (1 - _TABULAR_TEST_FRACTION)
    stratify = None if labels is None else labels[rest]
    train, val = train_test_split(rest, test_size=val_size, stratify=stratify, random_state=seed)
    return {"train": train, "val": val, "test": test}


def _stratified_subset(labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of ``n`` of ``labels``, keeping the class proportions."""
    from sklearn.model_selection import train_test_split

    if n >= len(labels):
        return np.arange(len(labels))
    subset, _ = train_test_split(np.arange(len(labels)), train_size=n, stratify=labels, random_state=seed)
    return subset


def _make_dir(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out
