"""Dataset formats: IMAGE_FILES (a zip of images plus ``images.csv``) and TABULAR (a CSV).

A worker decodes each dataset file once per process and shares the result with every
trial that reads it, so the readers keep a small cache keyed by the file's absolute
path, size and modification time: a rewritten file is decoded again. The arrays of a
cached dataset are read-only, because a template that changed them in place would
silently change the data of every later trial in the process; copy before mutating
(``images.astype(np.float32)``, ``torch.tensor(images)``).

Every bad input raises :class:`~baobab.exceptions.DatasetError` naming the file, the
row (the header is row 1) and the rule that was broken.

A zip is a small file that can stand for a huge one (a 1 MB member may inflate to
1 GiB), and what it declares may be a lie. Where a file comes from outside (an upload),
the reader is given :class:`ZipLimits`: it refuses a member whose path leaves the zip
(``..``, an absolute path, a drive letter) or that is encrypted or compressed other than
stored or deflated, holds the sizes the zip declares to the limits, and then inflates
each member it reads itself, a chunk at a time through a counter that stops the moment
the member passes its declared size. What is inflated is thus bounded by the limits,
whatever the headers say (:mod:`zipfile` alone would inflate a member whole before
cutting it to its declared size). The pixels each image header announces are checked
before the image is decoded.
"""

from __future__ import annotations

import csv
import io
import os
import re
import struct
import threading
import uuid
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

import numpy as np
import pandas as pd
from PIL import Image, UnidentifiedImageError

from baobab.exceptions import DatasetError

if TYPE_CHECKING:
    from _csv import Reader

__all__ = [
    "DEFAULT_TARGET",
    "IMAGES_CSV",
    "ImageDataset",
    "TabularDataset",
    "ZipLimits",
    "check_compatible",
    "read_image_files",
    "read_tabular",
    "write_image_files",
    "write_tabular",
]

IMAGES_CSV = "images.csv"
_IMAGE_COLUMNS = ("path", "class")
# Modes kept as they are, and modes converted on read to the mode they stand for.
_IMAGE_MODES = {"L": "L", "RGB": "RGB", "1": "L", "P": "RGB"}
_MAX_CLASS = 2**31 - 1
_CACHE_SIZE = 8
_MIB = 2**20
#: Members smaller than this are not held to the compression ratio: a tiny, regular file
#: (a short images.csv) compresses far better than any bomb needs, and costs nothing.
_RATIO_FLOOR = _MIB
#: How much is read or inflated at a time from an uploaded zip.
_CHUNK = 2**16
# A zip member's local header (zipfile.structFileHeader): its name and extra field lengths are the last two.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_DRIVE = re.compile(r"[A-Za-z]:")


@dataclass(frozen=True)
class ZipLimits:
    """Caps on what an IMAGE_FILES zip may inflate to (``BAOBAB_ZIP_*`` settings).

    ``member_bytes`` bounds one member and one decoded image, ``total_bytes`` the members
    together and the decoded image array, ``max_ratio`` a member's inflated size over its
    compressed size (for members of 1 MiB and more).
    """

    member_bytes: int
    total_bytes: int
    max_ratio: float


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """Decoded IMAGE_FILES: ``images`` uint8 (N,H,W) grayscale or (N,H,W,3) colour.

    ``labels`` are int64 class indices and ``num_classes`` is the largest label plus one.
    ``path`` is the absolute path the dataset was read from (None when built in memory).
    """

    images: np.ndarray
    labels: np.ndarray
    num_classes: int
    path: str | None = None


@dataclass(frozen=True, eq=False)
class TabularDataset:
    """Decoded TABULAR: ``features`` float32 (N,F) in the column order of ``feature_names``.

    ``target`` is int64 for class labels and float64 for a regression target. When the
    target column holds strings, ``target`` indexes ``classes`` (the label names).
    """

    features: np.ndarray
    feature_names: tuple[str, ...]
    target: np.ndarray
    classes: tuple[str, ...] | None = None
    path: str | None = None


_T = TypeVar("_T")
_cache: OrderedDict[Hashable, tuple[tuple[int, int], object]] = OrderedDict()
_cache_lock = threading.Lock()


def _cached(path: str | os.PathLike[str], key: tuple[Hashable, ...], decode: Callable[[str], _T]) -> _T:
    """Return ``decode(abspath)``, decoded at most once per (file version, key).

    Two threads asking for the same new file at once may both decode it; the later one
    wins. That costs time, never correctness, and keeps the lock off the slow path.
    """
    abspath = os.path.abspath(path)
    try:
        st = os.stat(abspath)
    except OSError as e:
        raise DatasetError(f"cannot open: {e.strerror}", file=abspath) from None
    stamp = (st.st_size, st.st_mtime_ns)
    full_key = (abspath, *key)
    with _cache_lock:
        hit = _cache.get(full_key)
        if hit is not None and hit[0] == stamp:
            _cache.move_to_end(full_key)
            return hit[1]  # type: ignore[return-value]
    value = decode(abspath)
    with _cache_lock:
        _cache[full_key] = (stamp, value)
        _cache.move_to_end(full_key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


# --- IMAGE_FILES ------------------------------------------------------------------


def read_image_files(path: str | os.PathLike[str], *, limits: ZipLimits | None = None) -> ImageDataset:
    """Read an IMAGE_FILES zip: ``images.csv`` (header ``path,class``) and the images it names.

    Args:
        path: the zip file. ``class`` is an integer >= 0; every image has the same size
            and is 8-bit grayscale or RGB (1-bit and palette images are converted).
        limits: caps on what the zip may inflate to, for a file from outside; None for
            one that passed them already (a worker reading an accepted dataset).

    Returns:
        The decoded dataset, shared with every other caller in this process.

    Raises:
        DatasetError: the file is missing, not a zip, breaks a rule of the format, or
            would inflate past ``limits``.
    """
    return _cached(path, ("IMAGE_FILES", limits), lambda abspath: _decode_image_files(abspath, limits))


def _decode_image_files(path: str, limits: ZipLimits | None) -> ImageDataset:
    try:
        with zipfile.ZipFile(path) as zf:
            read: Callable[[str], bytes] = zf.read
            if limits is not None:
                _check_members(zf, path, limits)
                read = _BoundedReader(zf, path).read
            rows = _read_images_csv(read, path, set(zf.namelist()))
            first_row, first_name, _ = rows[0]
            first = _read_image(read, path, first_row, first_name, limits)
            if limits is not None and len(rows) * first.nbytes > limits.total_bytes:
                raise DatasetError(
                    f"{len(rows)} images of {_describe(first.shape)} would take "
                    f"{len(rows) * first.nbytes / _MIB:.0f} MiB decoded, more than the "
                    f"{limits.total_bytes / _MIB:.0f} MiB a dataset may (BAOBAB_ZIP_TOTAL_MB)",
                    file=path,
                )
            images = np.empty((len(rows), *first.shape), dtype=np.uint8)
            images[0] = first
            for i, (row, name, _) in enumerate(rows[1:], start=1):
                image = _read_image(read, path, row, name, limits)
                if image.shape != first.shape:
                    raise DatasetError(
                        f"image {name!r} is {_describe(image.shape)}, but {first_name!r} (row {first_row}) is "
                        f"{_describe(first.shape)}; all images must have the same size and mode",
                        file=path,
                        row=row,
                    )
                images[i] = image
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise DatasetError(f"not a readable zip file: {e}", file=path) from None
    labels = np.array([label for _, _, label in rows], dtype=np.int64)
    return ImageDataset(_frozen(images), _frozen(labels), int(labels.max()) + 1, path)


def _describe(shape: tuple[int, ...]) -> str:
    mode = "RGB" if len(shape) == 3 else "grayscale"
    return f"{shape[1]}x{shape[0]} {mode}"


def _check_members(zf: zipfile.ZipFile, path: str, limits: ZipLimits) -> None:
    """Refuse a zip by its directory, before inflating anything: member paths, methods and declared sizes.

    The declared sizes bound what is inflated because :class:`_BoundedReader` stops a
    member that inflates past its own.
    """
    total = 0
    for info in zf.infolist():
        _check_member_path(info.filename, path)
        if info.flag_bits & 0x1:
            raise DatasetError(f"member {info.filename!r} is encrypted; upload a zip without a password", file=path)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise DatasetError(
                f"member {info.filename!r} is compressed with method {info.compress_type}; "
                "an uploaded zip stores or deflates its members",
                file=path,
            )
        if info.file_size > limits.member_bytes:
            raise DatasetError(
                f"{info.filename!r} inflates to {info.file_size / _MIB:.0f} MiB, more than the "
                f"{limits.member_bytes / _MIB:.0f} MiB one member may (BAOBAB_ZIP_MEMBER_MB)",
                file=path,
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size >= _RATIO_FLOOR and ratio > limits.max_ratio:
            raise DatasetError(
                f"{info.filename!r} inflates {ratio:.0f} times its compressed size, more than the "
                f"{limits.max_ratio:g} times a member may (BAOBAB_ZIP_MAX_RATIO)",
                file=path,
            )
        total += info.file_size
    if total > limits.total_bytes:
        raise DatasetError(
            f"the zip inflates to {total / _MIB:.0f} MiB, more than the {limits.total_bytes / _MIB:.0f} MiB "
            "a dataset may (BAOBAB_ZIP_TOTAL_MB)",
            file=path,
        )


def _check_member_path(name: str, path: str) -> None:
    """Refuse a member whose path would leave a folder it is unpacked into.

    Baobab reads members by name and unpacks nothing, but a dataset is also downloaded and
    unpacked elsewhere; both separators count, since a zip made on Windows may use either.
    """
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        why = "is an absolute path"
    elif ".." in parts:
        why = "climbs out of the zip with '..'"
    else:
        return
    raise DatasetError(f"member {name!r} {why}; members must be paths inside the zip", file=path)


class _BoundedReader:
    """Reads members of an uploaded zip, inflating each a chunk at a time up to its declared size.

    A member whose stream holds more than its directory entry declares is refused as soon
    as it passes it, so a crafted zip costs at most its declared sizes (held to the
    limits by :func:`_check_members`) plus a chunk.
    """

    def __init__(self, zf: zipfile.ZipFile, path: str) -> None:
        self._zf = zf
        self._path = path

    def read(self, name: str) -> bytes:
        """The member ``name``, checked against its declared size and CRC.

        Raises:
            KeyError: no member has this name (as :meth:`zipfile.ZipFile.read`).
            DatasetError: the member inflates past or short of its declared size, or is damaged.
        """
        info = self._zf.getinfo(name)
        out = bytearray()
        with open(self._path, "rb") as f:
            f.seek(info.header_offset)
            header = f.read(_LOCAL_HEADER.size)
            if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
                raise DatasetError(f"member {name!r} has no local header where the directory says", file=self._path)
            fields = _LOCAL_HEADER.unpack(header)
            f.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])
            inflater = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
            left = info.compress_size
            while not (inflater.eof if inflater is not None else left == 0):
                if inflater is not None and inflater.unconsumed_tail:
                    chunk = inflater.unconsumed_tail
                elif left > 0:
                    chunk = f.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    left -= len(chunk)
                else:
                    chunk = b""  # output the inflater held back
                data = chunk if inflater is None else inflater.decompress(chunk, _CHUNK)
                if not data and not chunk:
                    break
                if len(out) + len(data) > info.file_size:
                    raise DatasetError(
                        f"member {name!r} inflates past the {info.file_size} bytes the zip declares for it",
                        file=self._path,
                    )
                out += data
        if len(out) != info.file_size or zlib.crc32(out) != info.CRC:
            raise DatasetError(
                f"member {name!r} is damaged: it inflates to {len(out)} bytes (declared {info.file_size}) "
                "or fails its CRC check",
                file=self._path,
            )
        return bytes(out)


def _read_images_csv(read: Callable[[str], bytes], path: str, names: set[str]) -> list[tuple[int, str, int]]:
    """The rows of ``images.csv`` as (row number, image name, class)."""
    try:
        text = read(IMAGES_CSV).decode("utf-8-sig")
    except KeyError:
        raise DatasetError(
            f"no {IMAGES_CSV} in the zip; add one with the header 'path,class' and a row per image", file=path
        ) from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"{IMAGES_CSV} is not UTF-8 text: {e}", file=path) from None
    reader = csv.reader(io.StringIO(text))
    try:
        return _parse_images_csv(reader, names, path)
    except csv.Error as e:
        raise DatasetError(f"{IMAGES_CSV} is not valid CSV: {e}", file=path, row=reader.line_num) from None


def _parse_images_csv(reader: Reader, names: set[str], path: str) -> list[tuple[int, str, int]]:
    header = [column.strip() for column in next(reader, [])]
    missing = [column for column in _IMAGE_COLUMNS if column not in header]
    if missing:
        raise DatasetError(
            f"{IMAGES_CSV} lacks column(s) {', '.join(missing)}; its header must hold 'path,class', got {header}",
            file=path,
            row=1,
        )
    path_col, class_col = header.index("path"), header.index("class")
    rows: list[tuple[int, str, int]] = []
    for record in reader:
        if not record:
            continue
        row = reader.line_num
        if len(record) != len(header):
            raise DatasetError(
                f"{IMAGES_CSV} has {len(record)} field(s) here, the header {len(header)}", file=path, row=row
            )
        name, label = record[path_col].strip(), record[class_col].strip()
        if not (label.isascii() and label.isdigit()) or int(label) > _MAX_CLASS:
            raise DatasetError(
                f"{IMAGES_CSV}: class {label!r} is not an integer from 0 to {_MAX_CLASS}", file=path, row=row
            )
        if name not in names:
            raise DatasetError(f"{IMAGES_CSV} names image {name!r}, which is not in the zip", file=path, row=row)
        rows.append((row, name, int(label)))
    if not rows:
        raise DatasetError(f"{IMAGES_CSV} has no rows: the dataset is empty", file=path)
    return rows


def _read_image(read: Callable[[str], bytes], path: str, row: int, name: str, limits: ZipLimits | None) -> np.ndarray:
    try:
        image = Image.open(io.BytesIO(read(name)))  # decodes the header only
        decoded = image.width * image.height * len(image.getbands())
        if limits is not None and decoded > limits.member_bytes:
            raise DatasetError(
                f"image {name!r} is {image.width}x{image.height} {image.mode}: {decoded / _MIB:.0f} MiB decoded, more "
                f"than the {limits.member_bytes / _MIB:.0f} MiB one image may (BAOBAB_ZIP_MEMBER_MB)",
                file=path,
                row=row,
            )
        image.load()
    except DatasetError:  # a ValueError too, and already clear
        raise
    except (OSError, SyntaxError, ValueError, zipfile.BadZipFile, zlib.error, Image.DecompressionBombError) as e:
        # Pillow's own message for an unknown format names the in-memory buffer, not the image.
        reason = "no image format" if isinstance(e, UnidentifiedImageError) else str(e)
        raise DatasetError(f"image {name!r} cannot be decoded as PNG or JPEG: {reason}", file=path, row=row) from None
    mode = _IMAGE_MODES.get(image.mode)
    if mode is None:
        raise DatasetError(f"image {name!r} has mode {image.mode}; use 8-bit grayscale (L) or RGB", file=path, row=row)
    return np.asarray(image if image.mode == mode else image.convert(mode), dtype=np.uint8)


def write_image_files(path: str | os.PathLike[str], images: np.ndarray, labels: Sequence[int] | np.ndarray) -> Path:
    """Write ``images`` (uint8 (N,H,W) or (N,H,W,3)) and ``labels`` as an IMAGE_FILES zip of PNGs.

    PNGs are stored in the zip as they are: they are compressed already.

    Returns:
        The path written.

    Raises:
        ValueError: the arrays do not have the shapes and types above.
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.dtype != np.uint8 or images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[3] != 3):
        raise ValueError(f"images must be uint8 (N,H,W) or (N,H,W,3), got {images.dtype} {images.shape}")
    if labels.shape != (len(images),) or labels.dtype.kind not in "iu" or (labels < 0).any():
        raise ValueError(f"labels must be {len(images)} integers >= 0, got {labels.dtype} {labels.shape}")
    if len(images) == 0:
        raise ValueError("an IMAGE_FILES dataset needs at least one image")
    width = max(5, len(str(len(images) - 1)))
    lines = ["path,class"]

    def write(f: BinaryIO) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            for i, (image, label) in enumerate(zip(images, labels, strict=True)):
                name = f"images/{i:0{width}d}.png"
                buf = io.BytesIO()
                Image.fromarray(image).save(buf, format="PNG")
                zf.writestr(name, buf.getvalue())
                lines.append(f"{name},{int(label)}")
            zf.writestr(IMAGES_CSV, "\n".join(lines) + "\n", compress_type=zipfile.ZIP_DEFLATED)

    return _write_atomically(Path(path), write)


def _write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Write through a temporary file beside ``path``, then rename it into place.

    A reader (or the cache, which keys on size and mtime) never sees half a file.
    """
    # Not tempfile.mkstemp: its 0600 mode would stick to the dataset; open() honours the umask.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# --- TABULAR ----------------------------------------------------------------------

#: The target column the platform reads of a TABULAR dataset (the validation rows it makes queries of,
#: the columns a predictor expects) when the train job names none. Such a job's ``train()`` gets no
#: ``target`` and keeps its own default, which the examples and ``baobab datasets build`` agree on.
DEFAULT_TARGET = "target"


def read_tabular(path: str | os.PathLike[str], *, target: str, classes: Sequence[str] | None = None) -> TabularDataset:
    """Read a TABULAR CSV: a header row, numeric feature columns and one target column.

    Args:
        path: the CSV file.
        target: the name of the target column; every other column is a feature.
        classes: for a target of string labels, the label names in index order. Pass the
            training set's ``classes`` when reading its validation or test set so that
            the same label gets the same index even when a class is absent there. By
            default the labels found are sorted.

    Returns:
        The decoded dataset, shared with every other caller in this process. Integer
        targets stay int64; string labels become int64 indices into ``classes``; float
        targets (regression) are float64.

    Raises:
        DatasetError: the file is missing or not CSV, has no data rows, lacks the target
            column, or holds a missing or non-numeric feature value, or a label not in
            ``classes``.
    """
    classes_key = tuple(classes) if classes is not None else None
    return _cached(path, ("TABULAR", target, classes_key), lambda p: _decode_tabular(p, target, classes_key))


def _decode_tabular(path: str, target: str, classes: tuple[str, ...] | None) -> TabularDataset:
    try:
        # low_memory=False infers each column's type from all of it, not chunk by chunk.
        df = pd.read_csv(path, low_memory=False)
    except pd.errors.EmptyDataError:
        raise DatasetError("the file is empty; a TABULAR dataset is a CSV with a header row", file=path) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as e:
        line = re.search(r"line (\d+)", str(e))
        raise DatasetError(
            f"not a readable CSV file: {e}", file=path, row=int(line.group(1)) if line else None
        ) from None
    columns = [str(c) for c in df.columns]
    if target not in columns:
        raise DatasetError(f"no target column {target!r}; the columns are {columns}", file=path, row=1)
    if df.empty:
        raise DatasetError("no data rows: the dataset is empty", file=path)
    feature_names = tuple(c for c in columns if c != target)
    if not feature_names:
        raise DatasetError(f"no feature columns: only the target column {target!r}", file=path, row=1)
    missing = df.isna().to_numpy().nonzero()
    if len(missing[0]):
        i, j = missing[0][0], missing[1][0]
        raise DatasetError(f"column {columns[j]!r} has a missing value; fill or drop it", file=path, row=int(i) + 2)
    for name in feature_names:
        column = df[name]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            bad = pd.to_numeric(column, errors="coerce").isna().to_numpy().nonzero()[0]
            raise DatasetError(
                f"feature column {name!r} holds {column.iloc[bad[0] if len(bad) else 0]!r}, which is not a number; "
                "encode categorical features as numbers",
                file=path,
                row=int(bad[0]) + 2 if len(bad) else None,
            )
    values = df[list(feature_names)].to_numpy(dtype=np.float64)
    infinite = (~(np.abs(values) <= np.finfo(np.float32).max)).nonzero()
    if len(infinite[0]):
        i, j = infinite[0][0], infinite[1][0]
        raise DatasetError(
            f"feature column {feature_names[j]!r} holds {values[i, j]}, which is infinite or too large for float32",
            file=path,
            row=int(i) + 2,
        )
    target_values, found_classes = _decode_target(df[target], classes, path)
    return TabularDataset(
        _frozen(values.astype(np.float32)), feature_names, _frozen(target_values), found_classes, path
    )


def _decode_target(
    column: pd.Series, classes: tuple[str, ...] | None, path: str
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
        return column.to_numpy(dtype=np.int64), None
    if pd.api.types.is_float_dtype(column):
        return column.to_numpy(dtype=np.float64), None
    labels = column.astype(str)
    if classes is None:
        classes = tuple(sorted(labels.unique()))
    codes = pd.Categorical(labels, categories=list(classes)).codes
    unknown = (codes < 0).nonzero()[0]
    if len(unknown):
        raise DatasetError(
            f"label mismatch: target {labels.iloc[unknown[0]]!r} is not one of the classes {list(classes)}",
            file=path,
            row=int(unknown[0]) + 2,
        )
    return codes.astype(np.int64), classes


def write_tabular(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write ``frame`` as a TABULAR CSV (a header row, no index column).

    Returns:
        The path written.
    """
    return _write_atomically(Path(path), lambda f: frame.to_csv(f, index=False))


# --- Both -------------------------------------------------------------------------


def check_compatible(train: ImageDataset | TabularDataset, val: ImageDataset | TabularDataset) -> None:
    """Check that a validation (or test) set can score a model trained on ``train``.

    Both must be of one format, images of one size and mode, feature columns the same
    and in the same order, and every class label of ``val`` known to ``train``
    ("label mismatch"). A regression target is not checked for labels.

    Raises:
        DatasetError: naming ``val``'s file and the first rule it breaks.
    """
    if isinstance(train, ImageDataset) and isinstance(val, ImageDataset):
        if train.images.shape[1:] != val.images.shape[1:]:
            raise DatasetError(
                f"images are {_describe(val.images.shape[1:])}, the training images "
                f"{_describe(train.images.shape[1:])}",
                file=val.path,
            )
        _check_labels(train.labels, val.labels, val.path)
    elif isinstance(train, TabularDataset) and isinstance(val, TabularDataset):
        if train.feature_names != val.feature_names:
            missing = [c for c in train.feature_names if c not in val.feature_names]
            extra = [c for c in val.feature_names if c not in train.feature_names]
            detail = f"missing {missing}, extra {extra}" if missing or extra else "same columns in another order"
            raise DatasetError(f"feature columns differ from the training set's: {detail}", file=val.path, row=1)
        if train.target.dtype != val.target.dtype or (train.classes is None) != (val.classes is None):
            raise DatasetError(
                "target is of another kind than the training target: class labels are integers or strings, "
                "a regression target is floats",
                file=val.path,
            )
        if train.classes != val.classes:
            unknown = sorted(set(val.classes or ()) - set(train.classes or ()))
            if unknown:
                raise DatasetError(f"label mismatch: labels {unknown} are not in the training set", file=val.path)
            raise DatasetError(
                "label mismatch: its label indices differ from the training set's; "
                "read it with read_tabular(..., classes=train.classes)",
                file=val.path,
            )
        if train.target.dtype.kind != "f":
            _check_labels(train.target, val.target, val.path)
    else:
        raise DatasetError(f"a {type(val).__name__} cannot validate a {type(train).__name__}", file=val.path)


def _check_labels(train: np.ndarray, val: np.ndarray, path: str | None) -> None:
    unknown = np.setdiff1d(val, train)
    if len(unknown):
        raise DatasetError(f"label mismatch: labels {unknown.tolist()} are not in the training set", file=path)
