"""``baobab datasets build``, run through the real command group on the real data."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from baobab.cli import main
from baobab.store import read_image_files, read_tabular


def test_build_fashion_mnist(tmp_path: Path) -> None:
    out = tmp_path / "fm"
    result = CliRunner().invoke(main, ["datasets", "build", "fashion-mnist", "--out", str(out), "--limit", "200"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {out / 'train.zip'}  180 images, 10 classes",
        f"wrote {out / 'val.zip'}  20 images, 10 classes",
        f"wrote {out / 'test.zip'}  33 images, 10 classes",
        "classes: 0 T-shirt/top, 1 Trouser, 2 Pullover, 3 Dress, 4 Coat, 5 Sandal, 6 Shirt, 7 Sneaker, 8 Bag, "
        "9 Ankle boot",
    ]
    assert read_image_files(out / "val.zip").images.shape == (20, 28, 28)


def test_build_fashion_mnist_without_source(tmp_path: Path) -> None:
    args = ["datasets", "build", "fashion-mnist", "--out", str(tmp_path / "fm"), "--source", str(tmp_path / "none")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "Error: " in result.output
    assert "install the Debian package dataset-fashion-mnist or point the source (--source)" in result.output
    assert str(tmp_path / "none" / "train-images-idx3-ubyte.gz") in result.output


def test_build_fashion_mnist_too_small(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["datasets", "build", "fashion-mnist", "--out", str(tmp_path), "--limit", "50"])
    assert result.exit_code == 1
    assert "limit 50 with val_fraction 0.1 gives 45 training and 5 validation images" in result.output


def test_build_fashion_mnist_bad_fraction(tmp_path: Path) -> None:
    args = ["datasets", "build", "fashion-mnist", "--out", str(tmp_path), "--val-fraction", "1.5"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "--val-fraction" in result.output and "0<x<1" in result.output


def test_build_tabular(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["datasets", "build", "tabular", "wine", "--out", str(tmp_path), "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {tmp_path / 'train.csv'}  106 rows, 3 classes",
        f"wrote {tmp_path / 'val.csv'}  36 rows, 3 classes",
        f"wrote {tmp_path / 'test.csv'}  36 rows, 3 classes",
        "classes: 0 class_0, 1 class_1, 2 class_2",
    ]
    assert read_tabular(tmp_path / "train.csv", target="target").features.shape == (106, 13)


def test_build_tabular_regression(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["datasets", "build", "tabular", "diabetes", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"wrote {tmp_path / 'train.csv'}  264 rows, regression target"
    assert "classes:" not in result.output


def test_build_tabular_unknown_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["datasets", "build", "tabular", "mnist", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "'mnist' is not one of 'breast_cancer', 'diabetes', 'digits', 'iris', 'wine'" in result.output
    assert not any(tmp_path.iterdir())
