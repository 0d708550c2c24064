"""Fixtures the ENAS examples' tests share (a module's own fixture of the same name wins)."""

from __future__ import annotations

import numpy as np
import pytest

from baobab.store import write_image_files


@pytest.fixture(scope="module")
def image_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """12x12 images of three classes (a bright bar at the top, middle or bottom): 120 to train, 40 to score."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("bars")

    def bars(count: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, 3, count)
        images = rng.integers(0, 60, (count, 12, 12))
        for image, label in zip(images, labels, strict=True):
            image[4 * label : 4 * label + 4] += 180
        return images.astype(np.uint8), labels

    train = write_image_files(folder / "train.zip", *bars(120))
    return str(train), str(write_image_files(folder / "val.zip", *bars(40)))
