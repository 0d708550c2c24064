"""Storage: parameters, dataset formats and builders, artifacts (and, with the platform, metadata)."""

from baobab.store._artifacts import ArtifactError, ArtifactNotFoundError, ArtifactStore, validate_key
from baobab.store._builders import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_SOURCE,
    TABULAR_DATASETS,
    BuiltDataset,
    BuiltSplit,
    build_fashion_mnist,
    build_tabular,
)
from baobab.store._datasets import (
    IMAGES_CSV,
    ImageDataset,
    TabularDataset,
    check_compatible,
    read_image_files,
    read_tabular,
    write_image_files,
    write_tabular,
)
from baobab.store._params import ParamsFormatError, params_from_bytes, params_to_bytes

__all__ = [
    "ArtifactError",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_SOURCE",
    "IMAGES_CSV",
    "TABULAR_DATASETS",
    "BuiltDataset",
    "BuiltSplit",
    "ImageDataset",
    "ParamsFormatError",
    "TabularDataset",
    "build_fashion_mnist",
    "build_tabular",
    "check_compatible",
    "params_from_bytes",
    "params_to_bytes",
    "read_image_files",
    "read_tabular",
    "validate_key",
    "write_image_files",
    "write_tabular",
]
