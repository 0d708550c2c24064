"""``/api/v1/datasets``: uploads decoded before they are kept, visibility by owner, and clean refusals."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.datastructures import FileStorage
from werkzeug.test import TestResponse, encode_multipart

from baobab import Settings
from baobab.admin import create_app
from baobab.model import Task
from baobab.store import TrainJob, UserRole, session_scope, write_image_files

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
Upload = Callable[..., TestResponse]

CSV = b"x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n"


@pytest.fixture
def zip_bytes(tmp_path: Path) -> bytes:
    images = np.arange(4 * 3 * 3, dtype=np.uint8).reshape(4, 3, 3)
    return write_image_files(tmp_path / "tiny.zip", images, [0, 1, 0, 1]).read_bytes()


@pytest.fixture
def upload(client: FlaskClient) -> Upload:
    """Posts a multipart upload; ``file`` is (bytes, file name) or None to leave it out."""

    def upload(headers: Headers, upload: tuple[bytes, str] | None, **fields: str) -> TestResponse:
        data: dict[str, Any] = dict(fields)
        if upload is not None:
            data["file"] = (io.BytesIO(upload[0]), upload[1])
        return client.post("/api/v1/datasets", data=data, headers=headers, content_type="multipart/form-data")

    return upload


def stored_files(settings: Settings) -> list[Path]:
    return sorted(p for p in Path(settings.artifacts_url).rglob("*") if p.is_file())


def test_upload_list_get_delete(
    client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings, zip_bytes: bytes
) -> None:
    user, dev = add_user(UserRole.MODEL_DEVELOPER)
    images = upload(dev, (zip_bytes, "my images.zip"), name="digits", format="IMAGE_FILES")
    assert images.status_code == 201, images.json
    body = images.json
    assert body.pop("created_at")
    assert body == {
        "id": body["id"], "name": "digits", "format": "IMAGE_FILES", "size": len(zip_bytes),
        "checksum": hashlib.sha256(zip_bytes).hexdigest(), "owner_id": user["id"],
    }  # fmt: skip
    table = upload(dev, (CSV, "t.csv"), name="animals", format="TABULAR", target="label")
    assert table.status_code == 201, table.json
    assert table.json["format"] == "TABULAR"
    untargeted = upload(dev, (CSV, "../../etc/passwd"), name="no target", format="TABULAR")
    assert untargeted.status_code == 201, untargeted.json
    # Keys come from the format, never from the client's file name.
    assert sorted(p.name for p in stored_files(settings)) == ["data.csv", "data.csv", "data.zip"]

    listed = client.get("/api/v1/datasets", headers=dev)
    assert [d["name"] for d in listed.json["datasets"]] == ["no target", "animals", "digits"]  # newest first
    assert client.get(f"/api/v1/datasets/{images.json['id']}", headers=dev).json == images.json

    assert client.delete(f"/api/v1/datasets/{images.json['id']}", headers=dev).status_code == 204
    assert [p.name for p in stored_files(settings)] == ["data.csv", "data.csv"]
    gone = client.get(f"/api/v1/datasets/{images.json['id']}", headers=dev)
    assert (gone.status_code, gone.json["error"]["message"]) == (404, f"no dataset with id {images.json['id']}")
    assert client.get("/api/v1/datasets").status_code == 401


def test_bad_uploads_are_refused_and_leave_nothing(
    client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings, zip_bytes: bytes
) -> None:
    _, dev = add_user(UserRole.APP_DEVELOPER)
    ok_zip = (zip_bytes, "d.zip")
    cases: list[tuple[tuple[bytes, str] | None, dict[str, str], str, str]] = [
        (ok_zip, {"format": "IMAGE_FILES"}, "name", "'name' is required"),
        (ok_zip, {"name": "  ", "format": "IMAGE_FILES"}, "name", "'name' must not be blank"),
        (ok_zip, {"name": "x" * 256, "format": "IMAGE_FILES"}, "name", "at most 255"),
        (ok_zip, {"name": "d", "format": "VIDEO"}, "format", "expected one of IMAGE_FILES, TABULAR"),
        (None, {"name": "d", "format": "IMAGE_FILES"}, "file", "'file' is required"),
        (None, {"name": "d", "format": "IMAGE_FILES", "file": "d.zip"}, "file", "'file' came as a text field"),
        (ok_zip, {"name": "d", "format": "IMAGE_FILES", "colour": "red"}, "colour", "unknown field 'colour'"),
        (ok_zip, {"name": "d", "format": "IMAGE_FILES", "target": "y"}, "target", "TABULAR datasets only"),
        ((zip_bytes[:-40], "broken.zip"), {"name": "d", "format": "IMAGE_FILES"}, "file",
         r"^broken\.zip: not a readable zip file"),
        ((b"", "empty.csv"), {"name": "d", "format": "TABULAR"}, "file", r"^empty\.csv: the file is empty"),
        ((b"a,b\n", "head.csv"), {"name": "d", "format": "TABULAR"}, "file", "no data rows"),
        ((b'a,b\n1,"2\n', "quote.csv"), {"name": "d", "format": "TABULAR"}, "file", "not a readable CSV file"),
        ((CSV, "t.csv"), {"name": "d", "format": "TABULAR", "target": "y"}, "file",
         r"^t\.csv, row 1: no target column 'y'"),
        ((b"x,label\nabc,1\n", "t.csv"), {"name": "d", "format": "TABULAR", "target": "label"}, "file",
         r"^t\.csv, row 2: feature column 'x' holds 'abc'"),
    ]  # fmt: skip
    for file, fields, field, message in cases:
        response = upload(dev, file, **fields)
        assert response.status_code == 400, (fields, response.json)
        error = response.json["error"]
        assert error["field"] == field
        assert re.search(message, error["message"]), error["message"]
        assert settings.artifacts_url not in error["message"]  # no server path leaks
    as_json = client.post("/api/v1/datasets", json={"name": "d", "format": "TABULAR"}, headers=dev)
    assert (as_json.status_code, as_json.json["error"]["message"]) == (
        400, "send the dataset as 'Content-Type: multipart/form-data' with fields name, format, target, file"
    )  # fmt: skip
    assert stored_files(settings) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_too_large_is_a_json_413(settings: Settings, root: Headers) -> None:
    # Encoded in memory: the test client would spool a large body to a file it never closes.
    fields = {"name": "big", "format": "TABULAR", "file": FileStorage(io.BytesIO(b"a\n" + b"1\n" * 750_000), "big.csv")}
    boundary, body = encode_multipart(fields)
    small = create_app(dataclasses.replace(settings, max_upload_mb=1))
    try:
        response = small.test_client().post(
            "/api/v1/datasets",
            data=body,
            headers=root,
            content_type=f"multipart/form-data; boundary={boundary}",
        )
    finally:
        small.extensions["baobab"].engine.dispose()
    assert response.status_code == 413, response.json
    assert response.json["error"]["code"] == "request_entity_too_large"
    assert "limit of 1 MiB" in response.json["error"]["message"]
    assert stored_files(settings) == []


def test_owners_see_their_own_and_admins_see_all(
    client: FlaskClient, upload: Upload, add_user: AddUser, root: Headers, settings: Settings
) -> None:
    _, alice = add_user(UserRole.MODEL_DEVELOPER)
    _, bob = add_user(UserRole.APP_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)
    mine = upload(alice, (CSV, "a.csv"), name="alice's", format="TABULAR").json["id"]
    theirs = upload(bob, (CSV, "b.csv"), name="bob's", format="TABULAR").json["id"]

    def names(headers: Headers) -> list[str]:
        return [d["name"] for d in client.get("/api/v1/datasets", headers=headers).json["datasets"]]

    assert names(alice) == ["alice's"]
    assert names(bob) == ["bob's"]
    assert names(admin) == names(root) == ["bob's", "alice's"]
    # Someone else's dataset answers like a missing one.
    for response in (
        client.get(f"/api/v1/datasets/{theirs}", headers=alice),
        client.delete(f"/api/v1/datasets/{theirs}", headers=alice),
    ):
        assert (response.status_code, response.json["error"]["message"]) == (404, f"no dataset with id {theirs}")
    assert client.get(f"/api/v1/datasets/{mine}", headers=admin).status_code == 200
    assert client.delete(f"/api/v1/datasets/{theirs}", headers=admin).status_code == 204
    assert names(root) == ["alice's"]
    assert len(stored_files(settings)) == 1


def test_a_dataset_a_train_job_uses_cannot_be_deleted(
    app: Flask, client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings
) -> None:
    user, dev = add_user(UserRole.MODEL_DEVELOPER)
    dataset = upload(dev, (CSV, "t.csv"), name="used", format="TABULAR").json["id"]
    job = TrainJob(
        owner_id=user["id"], app="app", app_version=1, task=Task.TABULAR_CLASSIFICATION,
        train_dataset_id=dataset, val_dataset_id=dataset, budget={},
    )  # fmt: skip
    with session_scope(app.extensions["baobab"].engine) as session:
        session.add(job)
    response = client.delete(f"/api/v1/datasets/{dataset}", headers=dev)
    assert (response.status_code, response.json["error"]["code"]) == (409, "conflict")
    assert "used by a train job" in response.json["error"]["message"]
    assert client.get(f"/api/v1/datasets/{dataset}", headers=dev).status_code == 200
    assert len(stored_files(settings)) == 1
