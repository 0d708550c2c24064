"""Names and uploads the admin API must refuse, storing nothing (issue 21, items 11 and 12): one name rule
for apps, datasets, models and zoo models (issue 34, item 4: no bidi, zero-width or BOM characters either, and
names and emails kept NFC-normalised); one ``file`` part per upload; a broken multipart body said so."""

from __future__ import annotations

import io
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import CSV, add_model, job_body, upload_dataset

Headers = dict[str, str]
#: Every kind of name the rule refuses, with what the message says about it.
BAD_NAMES = [
    (".", "may not be '.'"),
    ("..", "may not be '..'"),
    ("\x00", "control character '\\x00' at position 0"),
    ("data\x00set", "control character '\\x00' at position 4"),
    ("two\nlines", "control character '\\n'"),
    ("tab\there", "control character '\\t'"),
    ("bell\x07", "control character '\\x07'"),
    ("del\x7f", "control character '\\x7f'"),
    ("c1\x85", "control character '\\x85'"),
    ("sep\u2028arator", "control character '\\u2028'"),
    ("\u202egro.elpmaxe", "format character '\\u202e' (RIGHT-TO-LEFT OVERRIDE) at position 0"),
    ("a\u2066b", "format character '\\u2066' (LEFT-TO-RIGHT ISOLATE) at position 1"),
    ("zero\u200bwidth", "format character '\\u200b' (ZERO WIDTH SPACE) at position 4"),
    ("join\u200d", "format character '\\u200d' (ZERO WIDTH JOINER) at position 4"),
    ("\ufeffbom", "format character '\\ufeff' (ZERO WIDTH NO-BREAK SPACE) at position 0"),
    ("x" * 256, "has 256 characters, at most 255 are allowed"),
]
GOOD_NAMES = ["...", ".hidden", "a.b", "données été", "x" * 255]


def _upload(client: FlaskClient, headers: Headers, data: dict[str, Any]) -> Any:
    return client.post("/api/v1/datasets", data=data, headers=headers, content_type="multipart/form-data")


def _datasets(client: FlaskClient, headers: Headers) -> list[str]:
    return [d["name"] for d in client.get("/api/v1/datasets", headers=headers).json["datasets"]]


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_bad_dataset_names_are_refused(client: FlaskClient, root: Headers, name: str, message: str) -> None:
    response = _upload(client, root, {"name": name, "format": "TABULAR", "file": (io.BytesIO(CSV), "d.csv")})
    assert response.status_code == 400, response.json
    assert response.json["error"]["field"] == "name" and message in response.json["error"]["message"]
    assert _datasets(client, root) == []


def test_good_names_pass(client: FlaskClient, root: Headers) -> None:
    for name in GOOD_NAMES:
        response = _upload(client, root, {"name": name, "format": "TABULAR", "file": (io.BytesIO(CSV), "d.csv")})
        assert response.status_code == 201, (name, response.json)
    assert sorted(_datasets(client, root)) == sorted(GOOD_NAMES)


@pytest.mark.parametrize(("name", "message"), BAD_NAMES[:-1])
def test_bad_model_names_are_refused_before_the_template_is_checked(
    client: FlaskClient, root: Headers, name: str, message: str
) -> None:
    data = {"name": name, "task": "TABULAR_CLASSIFICATION", "class_name": "Model", "file": (io.BytesIO(b""), "m.py")}
    response = client.post("/api/v1/models", data=data, headers=root, content_type="multipart/form-data")
    assert response.status_code == 400, response.json
    assert response.json["error"]["field"] == "name" and message in response.json["error"]["message"]
    assert client.get("/api/v1/models", headers=root).json["models"] == []


def test_bad_app_names_are_refused(app: Flask, client: FlaskClient, root: Headers) -> None:
    me = client.get("/api/v1/users", headers=root).json["users"][0]["id"]
    data = upload_dataset(client, root)
    body = job_body(data, data, [add_model(app.extensions["baobab"].engine, me)])
    bad = [*[(name, message) for name, message in BAD_NAMES if len(name) < 64], ("x" * 65, "at most 64")]
    bad += [("a/b", "use 1 to 64 letters"), ("a b", "use 1 to 64 letters"), ("é", "use 1 to 64 letters")]
    for name, message in bad:
        response = client.post("/api/v1/train_jobs", json={**body, "app": name}, headers=root)
        assert response.status_code == 400, (name, response.json)
        assert response.json["error"]["field"] == "app" and message in response.json["error"]["message"], name
    assert client.get("/api/v1/train_jobs", headers=root).json["train_jobs"] == []
    for name in ("...", ".a", "a..b", "x" * 64):
        assert client.post("/api/v1/train_jobs", json={**body, "app": name}, headers=root).status_code == 201, name


def test_uploads_refuse_a_second_file_part(client: FlaskClient, root: Headers) -> None:
    files = [(io.BytesIO(CSV), "a.csv"), (io.BytesIO(CSV), "b.csv")]
    response = _upload(client, root, {"name": "two", "format": "TABULAR", "file": files})
    assert response.status_code == 400
    assert response.json["error"] == {
        "code": "bad_request",
        "field": "file",
        "message": "2 'file' parts; send the dataset as one 'file' part",
    }
    data = {"name": "m", "task": "TABULAR_CLASSIFICATION", "class_name": "Model"}
    files = [(io.BytesIO(b"x = 1"), "a.py"), (io.BytesIO(b"x = 2"), "b.py")]
    response = client.post(
        "/api/v1/models", data={**data, "file": files}, headers=root, content_type="multipart/form-data"
    )
    assert (response.status_code, response.json["error"]["field"]) == (400, "file")
    assert response.json["error"]["message"] == "2 'file' parts; send the template as one 'file' part"
    assert _datasets(client, root) == [] and client.get("/api/v1/models", headers=root).json["models"] == []


def test_a_broken_multipart_body_is_named_as_such(client: FlaskClient, root: Headers) -> None:
    part = b'--xyz\r\nContent-Disposition: form-data; name="name"\r\n\r\nset\r\n--xyz--\r\n'
    cases = [
        ("multipart/form-data", part, "its Content-Type names no boundary"),
        ("multipart/form-data; boundary=other", part, "no part could be read"),
        ("multipart/form-data; boundary=xyz", b"garbage", "no part could be read"),
        ("multipart/form-data; boundary=xyz", b"", "no part could be read"),
    ]
    for path, what in (("/api/v1/datasets", "the dataset"), ("/api/v1/models", "the template")):
        for content_type, data, problem in cases:
            response = client.post(path, data=data, headers={**root, "Content-Type": content_type})
            assert response.status_code == 400, response.json
            message = response.json["error"]["message"]
            assert message.startswith("the body is not valid multipart/form-data (") and problem in message
            assert message.endswith(f"send {what} as 'file'") and "'name' is required" not in message
    assert _datasets(client, root) == []


def test_a_name_is_stored_nfc_normalised(client: FlaskClient, root: Headers) -> None:
    decomposed = "e\u0301te\u0301"  # "été" typed with combining accents
    response = _upload(client, root, {"name": decomposed, "format": "TABULAR", "file": (io.BytesIO(CSV), "d.csv")})
    assert response.status_code == 201, response.json
    assert response.json["name"] == "\u00e9t\u00e9" and _datasets(client, root) == ["\u00e9t\u00e9"]


BAD_EMAILS = [
    ("\u202egro.elpmaxe@nimda", "format character '\\u202e' (RIGHT-TO-LEFT OVERRIDE) at position 0"),
    ("admin\u200b@example.org", "format character '\\u200b' (ZERO WIDTH SPACE) at position 5"),
    ("\ufeffadmin@example.org", "format character '\\ufeff' (ZERO WIDTH NO-BREAK SPACE) at position 0"),
    ("ad\u2067min@example.org", "format character '\\u2067' (RIGHT-TO-LEFT ISOLATE) at position 2"),
    ("ad\x85min@example.org", "control character '\\x85' at position 2"),
]


@pytest.mark.parametrize(("email", "message"), BAD_EMAILS)
def test_bad_user_emails_are_refused(client: FlaskClient, root: Headers, email: str, message: str) -> None:
    body = {"email": email, "password": "long enough", "role": "APP_DEVELOPER"}
    response = client.post("/api/v1/users", json=body, headers=root)
    assert response.status_code == 400, response.json
    assert response.json["error"]["field"] == "email" and message in response.json["error"]["message"]
    assert len(client.get("/api/v1/users", headers=root).json["users"]) == 1  # the superadmin alone


def test_an_email_is_stored_nfc_normalised_and_logs_in_either_way(client: FlaskClient, root: Headers) -> None:
    body = {"email": "Re\u0301mi@example.org", "password": "long enough", "role": "APP_DEVELOPER"}
    response = client.post("/api/v1/users", json=body, headers=root)
    assert response.status_code == 201, response.json
    assert response.json["email"] == "r\u00e9mi@example.org"
    for typed in ("r\u00e9mi@example.org", "RE\u0301MI@example.org"):
        token = client.post("/api/v1/tokens", json={"email": typed, "password": "long enough"})
        assert token.status_code == 201, (typed, token.json)
