"""Zip bombs: an IMAGE_FILES zip read with :class:`ZipLimits` is refused before it inflates.

The limits are checked on the sizes the zip declares and the pixels each image header
announces; a zip that understates its sizes cannot inflate past them either (zipfile stops
at the declared size and fails the CRC), which one test crafts.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from baobab.exceptions import DatasetError
from baobab.store import IMAGES_CSV, ZipLimits, read_image_files, write_image_files

MIB = 2**20
LIMITS = ZipLimits(member_bytes=8 * MIB, total_bytes=32 * MIB, max_ratio=200)


def _zeros_zip(path: Path, members: dict[str, int], csv: str = "path,class\nbig.png,0\n") -> Path:
    """A zip of ``images.csv`` and members of so many zero bytes each, deflated (a bomb's shape)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(IMAGES_CSV, csv)
        for name, size in members.items():
            with zf.open(name, "w", force_zip64=True) as member:
                for start in range(0, size, 16 * MIB):
                    member.write(bytes(min(16 * MIB, size - start)))
    return path


def _png_header(width: int, height: int) -> bytes:
    """A PNG that announces ``width`` x ``height`` grayscale pixels and holds none of them."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def test_a_member_declared_past_the_member_cap_is_refused(tmp_path: Path) -> None:
    bomb = _zeros_zip(tmp_path / "bomb.zip", {"big.png": 64 * MIB})
    with pytest.raises(DatasetError, match=r"'big.png' inflates to 64 MiB, more than the 8 MiB .*BAOBAB_ZIP_MEMBER_MB"):
        read_image_files(bomb, limits=LIMITS)


def test_members_together_past_the_total_cap_are_refused(tmp_path: Path) -> None:
    many = _zeros_zip(tmp_path / "many.zip", {f"{i}.png": 6 * MIB for i in range(6)})
    limits = ZipLimits(member_bytes=8 * MIB, total_bytes=32 * MIB, max_ratio=10_000)
    with pytest.raises(DatasetError, match=r"the zip inflates to 36 MiB, more than the 32 MiB .*BAOBAB_ZIP_TOTAL_MB"):
        read_image_files(many, limits=limits)


def test_a_member_compressed_past_the_ratio_is_refused(tmp_path: Path) -> None:
    dense = _zeros_zip(tmp_path / "dense.zip", {"big.png": 4 * MIB})
    with pytest.raises(DatasetError, match=r"'big.png' inflates \d+ times its compressed size.*BAOBAB_ZIP_MAX_RATIO"):
        read_image_files(dense, limits=LIMITS)


def test_an_image_announcing_more_pixels_than_the_cap_is_refused_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "wide.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(IMAGES_CSV, "path,class\nwide.png,0\n")
        zf.writestr("wide.png", _png_header(4000, 4000))  # 15 MiB of pixels in 60 bytes
    with pytest.raises(DatasetError, match=r"image 'wide.png' is 4000x4000 L: 15 MiB decoded, more than the 8 MiB"):
        read_image_files(path, limits=LIMITS)


def test_images_that_together_decode_past_the_total_cap_are_refused(tmp_path: Path) -> None:
    images = np.zeros((100, 64, 64), dtype=np.uint8)
    path = write_image_files(tmp_path / "hundred.zip", images, np.zeros(100, dtype=np.int64))
    limits = ZipLimits(member_bytes=MIB, total_bytes=300_000, max_ratio=200)
    with pytest.raises(DatasetError, match=r"100 images of 64x64 grayscale would take 0 MiB decoded"):
        read_image_files(path, limits=limits)
    assert read_image_files(path, limits=LIMITS).images.shape == (100, 64, 64)  # within the limits: read


def test_a_zip_that_understates_a_members_size_inflates_no_further(tmp_path: Path) -> None:
    liar = tmp_path / "liar.zip"
    with zipfile.ZipFile(liar, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(IMAGES_CSV, "path,class\nbig.png,0\n")
        zf.writestr("big.png", bytes(64 * MIB))
    data = bytearray(liar.read_bytes())
    # Both headers of big.png now say it inflates to 1,000 bytes (uncompressed size: offset 22 in
    # the local header, 24 in the central directory's entry).
    struct.pack_into("<I", data, data.rfind(b"PK\x03\x04") + 22, 1000)
    struct.pack_into("<I", data, data.rfind(b"PK\x01\x02") + 24, 1000)
    liar.write_bytes(bytes(data))
    assert zipfile.ZipFile(liar).getinfo("big.png").file_size == 1000
    with pytest.raises(DatasetError, match="member 'big.png' inflates past the 1000 bytes the zip declares for it"):
        read_image_files(liar, limits=LIMITS)


def test_refusing_a_gibibyte_bomb_keeps_the_memory_of_the_process_bounded(tmp_path: Path) -> None:
    """The issue's case: about 1 MB on disk, 1 GiB inflated, refused without inflating it."""
    bomb = _zeros_zip(tmp_path / "gib.zip", {"big.png": 1024 * MIB})
    assert bomb.stat().st_size < 2 * MIB
    probe = f"""
import json, resource
from baobab.store import ZipLimits, read_image_files
from baobab.exceptions import DatasetError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_image_files({str(bomb)!r}, limits=ZipLimits(256 * 2**20, 4096 * 2**20, 200.0))
    refused = None
except DatasetError as e:
    refused = str(e)
print(json.dumps({{"refused": refused, "grew_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}}))
"""
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    result = json.loads(ran.stdout)
    assert "inflates to 1024 MiB, more than the 256 MiB one member may" in result["refused"]
    assert result["grew_kib"] < 32 * 1024, result  # the peak grew by less than 32 MiB
