"""The app factory: start-up checks, the first SUPERADMIN, JSON errors, and a real HTTP server."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from baobab import Mode, Settings
from baobab.admin import create_app
from baobab.exceptions import SettingsError, StoreError
from baobab.store import upgrade_database

Headers = dict[str, str]
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@sqlite_only
def test_production_mode_needs_a_secret_key_and_the_published_one_is_refused_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    for name in [name for name in os.environ if name.startswith("BAOBAB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BAOBAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BAOBAB_MODE", "production")
    with pytest.raises(SettingsError, match="production mode needs a secret key: set BAOBAB_SECRET_KEY"):
        create_app()
    assert not (tmp_path / "home").exists()  # refused before touching a database
    # Settings made without from_env (here by replace) are checked too.
    with pytest.raises(SettingsError, match="production mode needs a secret key"):
        create_app(dataclasses.replace(settings, mode=Mode.PRODUCTION))
    published = "baobab-development-key-do-not-use-in-production"  # what earlier versions signed with
    with pytest.raises(SettingsError, match="the development key that earlier versions published"):
        create_app(dataclasses.replace(settings, secret_key=published))


@sqlite_only
def test_production_mode_makes_up_no_password(
    settings: Settings, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    production = dataclasses.replace(settings, mode=Mode.PRODUCTION, secret_key="s3cret", admin_password=None)
    with caplog.at_level(logging.WARNING, logger="baobab.admin"):
        app = create_app(production)
    app.extensions["baobab"].engine.dispose()
    assert "set BAOBAB_ADMIN_EMAIL and BAOBAB_ADMIN_PASSWORD and restart" in caplog.text
    assert capsys.readouterr().err == ""
    response = app.test_client().post("/api/v1/tokens", json={"email": "admin@localhost", "password": "whatever"})
    assert response.status_code == 401


@sqlite_only
def test_bad_first_admin_settings_stop_the_start(settings: Settings) -> None:
    with pytest.raises(SettingsError, match="BAOBAB_ADMIN_PASSWORD: password has 5 characters, at least 8"):
        create_app(dataclasses.replace(settings, admin_password="short"))
    with pytest.raises(SettingsError, match="BAOBAB_ADMIN_EMAIL: 'root' is not an email address"):
        create_app(dataclasses.replace(settings, admin_email="root"))


def test_a_database_without_the_schema_is_refused(db_url: str, tmp_path: Path) -> None:
    settings = Settings.from_env(environ={}, home=tmp_path, database_url=db_url)
    with pytest.raises(StoreError, match=r"empty \(no Baobab tables\).*run `baobab db upgrade`"):
        create_app(settings)


def test_the_generated_password_is_printed_once(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade_database(db_url)
    settings = Settings.from_env(environ={}, home=tmp_path, database_url=db_url)
    first = create_app(settings)
    printed = capsys.readouterr().err
    match = re.search(r"created the SUPERADMIN admin@localhost with the generated password (\S+)\n", printed)
    assert match, printed
    response = first.test_client().post("/api/v1/tokens", json={"email": "admin@localhost", "password": match[1]})
    assert response.status_code == 201 and response.json["user"]["role"] == "SUPERADMIN"

    second = create_app(settings)
    assert capsys.readouterr().err == ""
    auth = {"Authorization": f"Bearer {response.json['token']}"}
    assert len(second.test_client().get("/api/v1/users", headers=auth).json["users"]) == 1
    for app in (first, second):
        app.extensions["baobab"].engine.dispose()


@sqlite_only
def test_every_error_is_json(
    app: Flask, client: FlaskClient, login: Callable[[str, str], Headers], settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    def boom() -> None:
        raise RuntimeError("secret detail from deep inside")

    app.add_url_rule("/api/v1/boom", "boom", boom)
    root = login(settings.admin_email, settings.admin_password)

    with caplog.at_level(logging.ERROR, logger="baobab.admin"):
        response = client.get("/api/v1/boom", headers=root)
    assert response.status_code == 500
    assert response.json == {
        "error": {"code": "internal_server_error", "message": "internal error: the server logged the details",
                  "field": None}
    }  # fmt: skip
    assert "secret detail" not in response.get_data(as_text=True)
    [record] = [r for r in caplog.records if r.name == "baobab.admin"]
    assert record.exc_info is not None and str(record.exc_info[1]) == "secret detail from deep inside"

    missing = client.get("/api/v1/nothing-here", headers=root)
    assert (missing.status_code, missing.json["error"]["code"]) == (404, "not_found")
    wrong_method = client.delete("/api/v1/users", headers=root)
    assert (wrong_method.status_code, wrong_method.json["error"]["code"]) == (405, "method_not_allowed")
    assert set(wrong_method.headers["Allow"].split(", ")) == {"GET", "POST", "HEAD", "OPTIONS"}
    assert wrong_method.content_type == "application/json"

    small = create_app(dataclasses.replace(settings, max_upload_mb=1))
    too_big = small.test_client().post("/api/v1/tokens", data=b"x" * (2 * 2**20), content_type="application/json")
    small.extensions["baobab"].engine.dispose()
    assert (too_big.status_code, too_big.json["error"]["code"]) == (413, "request_entity_too_large")


def test_a_real_http_server_on_loopback(app: Flask, settings: Settings) -> None:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy

    def call(method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", method=method)
        if body is not None:
            request.data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, json.load(response), response.headers
        except urllib.error.HTTPError as e:
            with e:
                return e.code, json.load(e), e.headers

    try:
        status, body, _ = call("POST", "/api/v1/tokens", {"email": settings.admin_email, "password": "wrong-one"})
        assert (status, body["error"]["message"]) == (401, "wrong email or password")
        status, body, _ = call(
            "POST", "/api/v1/tokens", {"email": settings.admin_email, "password": settings.admin_password}
        )
        assert status == 201
        token = body["token"]
        new = {"email": "linus@example.com", "password": "password-1", "role": "MODEL_DEVELOPER"}
        status, created, headers = call("POST", "/api/v1/users", new, token)
        assert (status, created["email"], headers["Content-Type"]) == (201, "linus@example.com", "application/json")
        status, body, _ = call("POST", "/api/v1/users", new, token)
        assert (status, body["error"]["field"]) == (409, "email")
        status, body, _ = call("GET", "/api/v1/users", token=token)
        assert (status, [u["email"] for u in body["users"]]) == (200, [settings.admin_email, "linus@example.com"])
        status, body, headers = call("GET", f"/api/v1/users/{created['id']}")
        assert (status, body["error"]["code"], headers["WWW-Authenticate"]) == (401, "unauthorized", "Bearer")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
