"""An uploaded zip bomb is refused with a 400 naming the limit, and leaves nothing behind (row, file or folder)."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import AddUser
from flask.testing import FlaskClient

from baobab import Settings
from baobab.store import IMAGES_CSV, UserRole, write_image_files


def _upload(client: FlaskClient, headers: dict[str, str], data: bytes, name: str) -> tuple[int, Any]:
    form = {"name": name, "format": "IMAGE_FILES", "file": (io.BytesIO(data), f"{name}.zip")}
    answer = client.post("/api/v1/datasets", data=form, headers=headers, content_type="multipart/form-data")
    return answer.status_code, answer.json


def _dataset_artifacts(settings: Settings) -> list[str]:
    """Every file and folder under the store's ``datasets/`` (each dataset has a folder of its own)."""
    root = Path(settings.artifacts_url)
    return sorted(str(p.relative_to(root)) for p in (root / "datasets").rglob("*"))


def test_a_zip_bomb_is_refused_before_it_inflates_and_leaves_nothing(
    client: FlaskClient, add_user: AddUser, settings: Settings, tmp_path: Path
) -> None:
    _, dev = add_user(UserRole.MODEL_DEVELOPER)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(IMAGES_CSV, "path,class\nbig.png,0\n")
        zf.writestr("big.png", bytes(300 * 2**20))  # 300 MiB of zeros in about 300 KB

    status, body = _upload(client, dev, buffer.getvalue(), "bomb")
    assert status == 400, body
    assert body["error"]["field"] == "file"
    assert body["error"]["message"] == (
        "bomb.zip: 'big.png' inflates to 300 MiB, more than the 256 MiB one member may (BAOBAB_ZIP_MEMBER_MB)"
    )
    assert _dataset_artifacts(settings) == []  # no file, and no empty datasets/<id>/ folder either
    assert client.get("/api/v1/datasets", headers=dev).json["datasets"] == []

    # A dataset that is deleted leaves no folder behind either.
    tiny = write_image_files(tmp_path / "ok.zip", np.zeros((2, 4, 4), dtype=np.uint8), [0, 1]).read_bytes()
    status, body = _upload(client, dev, tiny, "fine")
    assert status == 201, body
    assert len(_dataset_artifacts(settings)) == 2  # datasets/<id>/ and its data.zip
    assert client.delete(f"/api/v1/datasets/{body['id']}", headers=dev).status_code == 204
    assert _dataset_artifacts(settings) == []


def _lying_zip(actual: bytes, declared: int, *, central: bool, local: bool) -> bytes:
    """A zip of images.csv and ``big.png`` (deflated ``actual``) whose headers say it inflates to ``declared`` bytes.

    ``central`` rewrites the size in the central directory (what :mod:`zipfile` reads),
    ``local`` the one in the member's local header.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(IMAGES_CSV, "path,class\nbig.png,0\n")
        zf.writestr("big.png", actual)
    data = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("big.png")
    if local:
        data[info.header_offset + 22 : info.header_offset + 26] = struct.pack("<L", declared)
    if central:
        entry = data.rindex(b"PK\x01\x02")  # the last central directory entry is big.png's
        data[entry + 24 : entry + 28] = struct.pack("<L", declared)
    return bytes(data)


def _memory_kib(field: str) -> int:
    """``field`` (VmRSS, VmHWM) of this process, which runs the API in-process, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.parametrize(("central", "local"), [(True, True), (True, False), (False, True)])
def test_a_zip_that_understates_a_member_is_refused_without_inflating_it(
    client: FlaskClient, add_user: AddUser, settings: Settings, central: bool, local: bool
) -> None:
    """200 MiB of zeros declared as 1 KiB: refused, naming the member, while this process (the API) grows by
    under 64 MiB at its peak. The old reader inflated the whole member before cutting it to its declared size."""
    _, dev = add_user(UserRole.MODEL_DEVELOPER)
    bomb = _lying_zip(bytes(200 * 2**20), 1024, central=central, local=local)
    assert len(bomb) < 2**20
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from what is resident now
    before = _memory_kib("VmRSS")
    status, body = _upload(client, dev, bomb, "liar")
    grown_mib = (_memory_kib("VmHWM") - before) / 1024
    assert grown_mib < 64, f"the API's peak memory grew by {grown_mib:.0f} MiB"
    assert status == 400, body
    assert body["error"]["field"] == "file" and "'big.png'" in body["error"]["message"], body
    if central:
        assert body["error"]["message"] == (
            "liar.zip: member 'big.png' inflates past the 1024 bytes the zip declares for it"
        )
    assert _dataset_artifacts(settings) == []


@pytest.mark.parametrize(
    ("member", "why"),
    [
        ("../evil.png", "climbs out of the zip with '..'"),
        ("images/../../evil.png", "climbs out of the zip with '..'"),
        ("..\\evil.png", "climbs out of the zip with '..'"),
        ("/etc/evil.png", "is an absolute path"),
        ("\\evil.png", "is an absolute path"),
        ("C:evil.png", "is an absolute path"),
        ("c:/windows/evil.png", "is an absolute path"),
    ],
)
def test_a_member_whose_path_leaves_the_zip_is_refused(
    client: FlaskClient, add_user: AddUser, settings: Settings, tmp_path: Path, member: str, why: str
) -> None:
    _, dev = add_user(UserRole.MODEL_DEVELOPER)
    good = write_image_files(tmp_path / "ok.zip", np.zeros((2, 4, 4), dtype=np.uint8), [0, 1])
    buffer = io.BytesIO()
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(buffer, "w") as zf:
        for info in source.infolist():
            zf.writestr(info, source.read(info))
        info = zipfile.ZipInfo("x")
        info.filename = member  # ZipInfo() would rewrite a Windows path; the wire keeps it as sent
        zf.writestr(info, source.read("images/00000.png"))
    status, body = _upload(client, dev, buffer.getvalue(), "escape")
    assert status == 400, body
    assert body["error"] == {
        "code": "bad_request",
        "field": "file",
        "message": f"escape.zip: member {member!r} {why}; members must be paths inside the zip",
    }
    assert _dataset_artifacts(settings) == []
    # The same zip without the member is accepted.
    status, body = _upload(client, dev, good.read_bytes(), "fine")
    assert status == 201, body
