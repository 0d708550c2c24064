from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from baobab.exceptions import DatasetError
from baobab.store import (
    ImageDataset,
    TabularDataset,
    check_compatible,
    read_image_files,
    read_tabular,
    write_image_files,
    write_tabular,
)

RNG = np.random.default_rng(0)
GRAY = RNG.integers(0, 256, size=(5, 6, 4), dtype=np.uint8)  # 5 images, 6 high, 4 wide
COLOUR = RNG.integers(0, 256, size=(3, 6, 4, 3), dtype=np.uint8)


def png(array: np.ndarray, mode: str | None = None) -> bytes:
    """PNG bytes of a uint8 array (grayscale (H,W) or RGB (H,W,3)), optionally converted to ``mode``."""
    image = Image.fromarray(array)
    buf = io.BytesIO()
    (image.convert(mode) if mode else image).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def image_zip(tmp_path: Path) -> Callable[..., Path]:
    """Write a zip by hand, for inputs that ``write_image_files`` would refuse to write."""

    def make(csv_text: str | None, members: dict[str, bytes], name: str = "set.zip") -> Path:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as zf:
            if csv_text is not None:
                zf.writestr("images.csv", csv_text)
            for member, data in members.items():
                zf.writestr(member, data)
        return path

    return make


def where(path: Path, row: int | None = None) -> str:
    """The start of a DatasetError message about ``path`` (and ``row``), as a regex."""
    return re.escape(f"{path}, row {row}: " if row is not None else f"{path}: ")


# --- IMAGE_FILES: reading what was written ---------------------------------------


def test_grayscale_round_trip(tmp_path: Path) -> None:
    path = write_image_files(tmp_path / "gray.zip", GRAY, [0, 3, 1, 3, 0])
    ds = read_image_files(path)
    assert ds.images.dtype == np.uint8 and ds.images.shape == (5, 6, 4)
    np.testing.assert_array_equal(ds.images, GRAY)
    assert ds.labels.dtype == np.int64 and ds.labels.tolist() == [0, 3, 1, 3, 0]
    assert ds.num_classes == 4  # largest label + 1, though class 2 has no image
    assert ds.path == str(path)


def test_colour_round_trip(tmp_path: Path) -> None:
    ds = read_image_files(write_image_files(tmp_path / "rgb.zip", COLOUR, [2, 0, 1]))
    assert ds.images.shape == (3, 6, 4, 3)
    np.testing.assert_array_equal(ds.images, COLOUR)


def test_decoded_arrays_are_read_only(tmp_path: Path) -> None:
    ds = read_image_files(write_image_files(tmp_path / "gray.zip", GRAY, [0] * 5))
    with pytest.raises(ValueError, match="read-only"):
        ds.images[0, 0, 0] = 1
    with pytest.raises(ValueError, match="read-only"):
        ds.labels[0] = 1


def test_palette_and_one_bit_images_are_converted(image_zip) -> None:
    gray = GRAY[0]
    path = image_zip("path,class\na.png,0\n", {"a.png": png(np.stack([gray] * 3, axis=-1), "P")})
    assert read_image_files(path).images.shape == (1, 6, 4, 3)
    path = image_zip("path,class\nb.png,0\n", {"b.png": png(gray, "1")}, name="bits.zip")
    assert read_image_files(path).images.shape == (1, 6, 4)


def test_jpeg_images_are_read(image_zip) -> None:
    buf = io.BytesIO()
    Image.fromarray(COLOUR[0]).save(buf, format="JPEG")
    path = image_zip("path,class\nphoto.jpg,0\n", {"photo.jpg": buf.getvalue()})
    assert read_image_files(path).images.shape == (1, 6, 4, 3)


def test_extra_columns_and_column_order_are_accepted(image_zip) -> None:
    path = image_zip("class,note,path\n1,x,a.png\n", {"a.png": png(GRAY[0])})
    assert read_image_files(path).labels.tolist() == [1]


# --- IMAGE_FILES: every rule, with file and row -----------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=where(tmp_path / "nope.zip") + "cannot open") as e:
        read_image_files(tmp_path / "nope.zip")
    assert e.value.file == str(tmp_path / "nope.zip") and e.value.row is None


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "set.zip"
    path.write_text("path,class\n")
    with pytest.raises(DatasetError, match=where(path) + "not a readable zip file"):
        read_image_files(path)


def test_truncated_zip(tmp_path: Path) -> None:
    path = write_image_files(tmp_path / "set.zip", GRAY, [0] * 5)
    path.write_bytes(path.read_bytes()[:-60])  # cuts into the central directory
    with pytest.raises(DatasetError, match=where(path) + "not a readable zip file"):
        read_image_files(path)


def test_corrupt_image_member(tmp_path: Path) -> None:
    path = write_image_files(tmp_path / "set.zip", GRAY, [0] * 5)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("images/00002.png")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + 20  # inside the stored PNG
    data[start : start + 8] = b"\x00" * 8
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=where(path, 4) + "image 'images/00002.png' cannot be decoded"):
        read_image_files(path)


def test_no_images_csv(image_zip) -> None:
    path = image_zip(None, {"a.png": png(GRAY[0])})
    with pytest.raises(DatasetError, match=where(path) + "no images.csv in the zip"):
        read_image_files(path)


def test_missing_column(image_zip) -> None:
    path = image_zip("file,class\na.png,0\n", {"a.png": png(GRAY[0])})
    with pytest.raises(DatasetError, match=where(path, 1) + r"images.csv lacks column\(s\) path") as e:
        read_image_files(path)
    assert e.value.row == 1


def test_wrong_number_of_fields(image_zip) -> None:
    path = image_zip("path,class\na.png,0\na.png,0,7\n", {"a.png": png(GRAY[0])})
    with pytest.raises(DatasetError, match=where(path, 3) + r"images.csv has 3 field\(s\) here, the header 2"):
        read_image_files(path)


def test_image_missing_from_zip(image_zip) -> None:
    path = image_zip("path,class\na.png,0\nb.png,1\n", {"a.png": png(GRAY[0])})
    with pytest.raises(DatasetError, match=where(path, 3) + "images.csv names image 'b.png', which is not in the zip"):
        read_image_files(path)


def test_unreadable_image(image_zip) -> None:
    path = image_zip("path,class\na.png,0\nb.png,1\n", {"a.png": png(GRAY[0]), "b.png": b"not an image"})
    with pytest.raises(DatasetError) as refused:
        read_image_files(path)
    # The file's own name, never Pillow's name for the in-memory buffer (<_io.BytesIO object at 0x...>).
    assert str(refused.value) == f"{path}, row 3: image 'b.png' cannot be decoded as PNG or JPEG: no image format"


def test_images_of_different_sizes(image_zip) -> None:
    members = {"a.png": png(GRAY[0]), "b.png": png(GRAY[1]), "c.png": png(GRAY[2][:, :3])}
    path = image_zip("path,class\na.png,0\nb.png,1\nc.png,1\n", members)
    with pytest.raises(DatasetError, match=where(path, 4) + r"image 'c.png' is 3x6 grayscale, but 'a.png' \(row 2\)"):
        read_image_files(path)


def test_images_of_different_modes(image_zip) -> None:
    path = image_zip("path,class\na.png,0\nb.png,1\n", {"a.png": png(GRAY[0]), "b.png": png(COLOUR[0])})
    with pytest.raises(DatasetError, match=where(path, 3) + "image 'b.png' is 4x6 RGB, .* same size and mode"):
        read_image_files(path)


def test_unsupported_mode(image_zip) -> None:
    path = image_zip("path,class\na.png,0\n", {"a.png": png(COLOUR[0], "RGBA")})
    with pytest.raises(DatasetError, match=where(path, 2) + r"image 'a.png' has mode RGBA; use 8-bit grayscale \(L\)"):
        read_image_files(path)


@pytest.mark.parametrize("label", ["-1", "1.5", "one", "", "٣"])
def test_class_not_a_non_negative_integer(image_zip, label: str) -> None:
    path = image_zip(f"path,class\na.png,0\na.png,{label}\n", {"a.png": png(GRAY[0])})
    with pytest.raises(
        DatasetError, match=where(path, 3) + re.escape(f"images.csv: class {label!r} is not an integer")
    ):
        read_image_files(path)


def test_class_too_large(image_zip) -> None:
    path = image_zip(f"path,class\na.png,{2**31}\n", {"a.png": png(GRAY[0])})
    with pytest.raises(
        DatasetError, match=where(path, 2) + "images.csv: class '2147483648' is not an integer from 0 to"
    ):
        read_image_files(path)


def test_images_csv_not_csv(image_zip) -> None:
    path = image_zip(f"path,class\na.png,0\n{'x' * 200_000},1\n", {"a.png": png(GRAY[0])})
    with pytest.raises(
        DatasetError, match=where(path, 3) + "images.csv is not valid CSV: field larger than field limit"
    ):
        read_image_files(path)


def test_empty_set(image_zip) -> None:
    path = image_zip("path,class\n", {})
    with pytest.raises(DatasetError, match=where(path) + "images.csv has no rows: the dataset is empty"):
        read_image_files(path)


# --- TABULAR ----------------------------------------------------------------------


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_tabular_integer_target(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "b,target,a\n1.5,1,2\n-3,0,4\n")
    ds = read_tabular(path, target="target")
    assert ds.feature_names == ("b", "a")
    assert ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.features, [[1.5, 2], [-3, 4]])
    assert ds.target.dtype == np.int64 and ds.target.tolist() == [1, 0]
    assert ds.classes is None and ds.path == str(path)


def test_tabular_float_target_is_regression(tmp_path: Path) -> None:
    ds = read_tabular(write_csv(tmp_path / "t.csv", "x,y\n1,0.5\n2,151.0\n"), target="y")
    assert ds.target.dtype == np.float64 and ds.target.tolist() == [0.5, 151.0]


def test_tabular_string_labels_become_sorted_indices(tmp_path: Path) -> None:
    ds = read_tabular(write_csv(tmp_path / "t.csv", "x,y\n1,dog\n2,cat\n3,emu\n4,cat\n"), target="y")
    assert ds.classes == ("cat", "dog", "emu")
    assert ds.target.dtype == np.int64 and ds.target.tolist() == [1, 0, 2, 0]


def test_tabular_given_classes_fix_the_indices(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "val.csv", "x,y\n1,emu\n2,cat\n")
    ds = read_tabular(path, target="y", classes=("cat", "dog", "emu"))
    assert ds.target.tolist() == [2, 0] and ds.classes == ("cat", "dog", "emu")
    with pytest.raises(DatasetError, match=where(path, 2) + r"label mismatch: target 'emu' is not one of the classes"):
        read_tabular(path, target="y", classes=("cat", "dog"))


def test_write_tabular_round_trip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"f 1": [0.25, 1.0], "f2": [3, 4], "target": [1, 0]})
    ds = read_tabular(write_tabular(tmp_path / "t.csv", frame), target="target")
    assert ds.feature_names == ("f 1", "f2")
    np.testing.assert_array_equal(ds.features, [[0.25, 3], [1.0, 4]])


def test_tabular_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=where(tmp_path / "no.csv") + "cannot open"):
        read_tabular(tmp_path / "no.csv", target="y")


def test_tabular_not_csv(tmp_path: Path) -> None:
    path = write_image_files(tmp_path / "images.zip", GRAY, [0] * 5)
    with pytest.raises(DatasetError, match=where(path) + "not a readable CSV file"):
        read_tabular(path, target="y")


def test_tabular_ragged_row(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "x,y\n1,2\n3,4,5\n")
    with pytest.raises(DatasetError, match=where(path, 3) + "not a readable CSV file: .*Expected 2 fields") as e:
        read_tabular(path, target="y")
    assert e.value.row == 3


def test_tabular_empty_file(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "")
    with pytest.raises(DatasetError, match=where(path) + "the file is empty"):
        read_tabular(path, target="y")


def test_tabular_no_data_rows(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "x,y\n")
    with pytest.raises(DatasetError, match=where(path) + "no data rows: the dataset is empty"):
        read_tabular(path, target="y")


def test_tabular_target_column_missing(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "a,b\n1,2\n")
    with pytest.raises(DatasetError, match=where(path, 1) + r"no target column 'y'; the columns are \['a', 'b'\]"):
        read_tabular(path, target="y")


def test_tabular_no_feature_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "y\n1\n")
    with pytest.raises(DatasetError, match=where(path, 1) + "no feature columns: only the target column 'y'"):
        read_tabular(path, target="y")


def test_tabular_non_numeric_feature(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "a,b,y\n1,2,0\n3,4,1\n5,red,0\n")
    with pytest.raises(DatasetError, match=where(path, 4) + "feature column 'b' holds 'red', which is not a number"):
        read_tabular(path, target="y")


def test_tabular_infinite_feature(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "a,b,y\n1,2,0\n3,1e39,1\n")
    with pytest.raises(
        DatasetError, match=where(path, 3) + r"feature column 'b' holds 1e\+39, which is infinite or too"
    ):
        read_tabular(path, target="y")


@pytest.mark.parametrize("text, row, column", [("a,y\n1,0\n,1\n", 3, "a"), ("a,y\n1,0\n2,1\n3,NA\n", 4, "y")])
def test_tabular_missing_value(tmp_path: Path, text: str, row: int, column: str) -> None:
    path = write_csv(tmp_path / "t.csv", text)
    with pytest.raises(DatasetError, match=where(path, row) + f"column '{column}' has a missing value"):
        read_tabular(path, target="y")


# --- The cache --------------------------------------------------------------------


def test_second_read_returns_the_same_object(tmp_path: Path) -> None:
    zip_path = write_image_files(tmp_path / "set.zip", GRAY, [0] * 5)
    assert read_image_files(zip_path) is read_image_files(str(zip_path))
    csv_path = write_csv(tmp_path / "t.csv", "x,y\n1,2\n")
    assert read_tabular(csv_path, target="y") is read_tabular(csv_path, target="y")
    # Another target is another decoding of the same file.
    assert read_tabular(csv_path, target="x").feature_names == ("y",)
    labels_path = write_csv(tmp_path / "labels.csv", "x,y\n1,a\n")
    assert read_tabular(labels_path, target="y").target.tolist() == [0]
    assert read_tabular(labels_path, target="y", classes=["b", "a"]).target.tolist() == [1]


def test_rewritten_file_is_read_again(tmp_path: Path) -> None:
    path = write_image_files(tmp_path / "set.zip", GRAY, [0] * 5)
    first = read_image_files(path)
    mtime = path.stat().st_mtime_ns
    write_image_files(path, GRAY[::-1].copy(), [1] * 5)
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))  # a coarse clock must not hide the change
    second = read_image_files(path)
    assert second is not first
    np.testing.assert_array_equal(second.images, GRAY[::-1])
    assert second.labels.tolist() == [1] * 5


def test_same_size_rewrite_is_read_again(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", "x,y\n1,0\n")
    assert read_tabular(path, target="y").target.tolist() == [0]
    mtime = path.stat().st_mtime_ns
    write_csv(path, "x,y\n1,1\n")
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    assert read_tabular(path, target="y").target.tolist() == [1]


# --- check_compatible -------------------------------------------------------------


def test_compatible_image_sets_pass(tmp_path: Path) -> None:
    train = read_image_files(write_image_files(tmp_path / "train.zip", GRAY, [0, 1, 2, 1, 0]))
    val = read_image_files(write_image_files(tmp_path / "val.zip", GRAY[:2], [2, 2]))
    check_compatible(train, val)  # a validation set may lack classes


def test_image_label_mismatch(tmp_path: Path) -> None:
    train = read_image_files(write_image_files(tmp_path / "train.zip", GRAY, [0, 1, 0, 1, 0]))
    val_path = write_image_files(tmp_path / "val.zip", GRAY[:3], [0, 2, 5])
    with pytest.raises(
        DatasetError, match=where(val_path) + r"label mismatch: labels \[2, 5\] are not in the training"
    ):
        check_compatible(train, read_image_files(val_path))


def test_image_size_mismatch(tmp_path: Path) -> None:
    train = read_image_files(write_image_files(tmp_path / "train.zip", GRAY, [0] * 5))
    val_path = write_image_files(tmp_path / "val.zip", COLOUR, [0] * 3)
    with pytest.raises(DatasetError, match=where(val_path) + "images are 4x6 RGB, the training images 4x6 grayscale"):
        check_compatible(train, read_image_files(val_path))


def test_formats_differ(tmp_path: Path) -> None:
    train = read_image_files(write_image_files(tmp_path / "train.zip", GRAY, [0] * 5))
    val = read_tabular(write_csv(tmp_path / "val.csv", "x,y\n1,0\n"), target="y")
    with pytest.raises(DatasetError, match="a TabularDataset cannot validate a ImageDataset"):
        check_compatible(train, val)


def tabular(tmp_path: Path, name: str, text: str, **kwargs) -> TabularDataset:
    return read_tabular(write_csv(tmp_path / name, text), target="y", **kwargs)


def test_tabular_feature_columns_differ(tmp_path: Path) -> None:
    train = tabular(tmp_path, "train.csv", "a,b,y\n1,2,0\n")
    val = tabular(tmp_path, "val.csv", "a,c,y\n1,2,0\n")
    with pytest.raises(DatasetError, match=where(tmp_path / "val.csv", 1) + r".*missing \['b'\], extra \['c'\]"):
        check_compatible(train, val)
    val = tabular(tmp_path, "val2.csv", "b,a,y\n1,2,0\n")
    with pytest.raises(DatasetError, match="feature columns differ .*same columns in another order"):
        check_compatible(train, val)


def test_tabular_integer_label_mismatch(tmp_path: Path) -> None:
    train = tabular(tmp_path, "train.csv", "a,y\n1,0\n2,1\n")
    check_compatible(train, tabular(tmp_path, "ok.csv", "a,y\n1,1\n"))
    with pytest.raises(DatasetError, match=where(tmp_path / "val.csv") + r"label mismatch: labels \[3\]"):
        check_compatible(train, tabular(tmp_path, "val.csv", "a,y\n1,0\n1,3\n"))


def test_tabular_string_label_mismatch(tmp_path: Path) -> None:
    train = tabular(tmp_path, "train.csv", "a,y\n1,cat\n2,dog\n3,emu\n")
    with pytest.raises(DatasetError, match=r"label mismatch: labels \['yak'\] are not in the training set"):
        check_compatible(train, tabular(tmp_path, "val.csv", "a,y\n1,cat\n2,yak\n"))
    # A validation set that lacks a class gets other indices unless read with the training classes.
    with pytest.raises(DatasetError, match=r"label indices differ .* classes=train.classes"):
        check_compatible(train, tabular(tmp_path, "val2.csv", "a,y\n1,emu\n"))
    check_compatible(train, tabular(tmp_path, "val2.csv", "a,y\n1,emu\n", classes=train.classes))


def test_tabular_target_kinds_differ(tmp_path: Path) -> None:
    train = tabular(tmp_path, "train.csv", "a,y\n1,0.5\n")
    with pytest.raises(DatasetError, match="target is of another kind than the training target"):
        check_compatible(train, tabular(tmp_path, "val.csv", "a,y\n1,2\n"))
    check_compatible(train, tabular(tmp_path, "val2.csv", "a,y\n1,99.5\n"))  # regression: any values


def test_in_memory_datasets_have_no_path() -> None:
    labels = np.array([0], dtype=np.int64)
    train = ImageDataset(GRAY[:1], labels, 1)
    with pytest.raises(DatasetError, match=r"^label mismatch") as e:
        check_compatible(train, ImageDataset(GRAY[:1], labels + 1, 2))
    assert e.value.file is None
