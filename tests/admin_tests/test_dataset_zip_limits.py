"""An uploaded zip bomb is refused with a 400 naming the limit, and leaves nothing behind (row, file or folder)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
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
