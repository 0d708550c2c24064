"""The web UI served at ``/``: built files, the app's page for its own routes, and the API left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from baobab.admin._web import WEB_DIR_CONFIG

INDEX = "<!doctype html><title>Baobab</title><div id=root></div>"


# buffered=True: the test client then closes the files it sent, as a server does.


@pytest.fixture
def built(app: Flask, tmp_path: Path) -> Path:
    """A built UI in a folder of its own, as ``npm run build`` leaves it."""
    folder = tmp_path / "web"
    (folder / "assets").mkdir(parents=True)
    (folder / "index.html").write_text(INDEX)
    (folder / "assets" / "index-abc123.js").write_text("console.log('app')")
    app.config[WEB_DIR_CONFIG] = str(folder)
    return folder


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize("path", ["/", "/jobs", "/jobs/fraud/3", "/jobs/fraud/3/trials/17", "/users", "/apps/x"])
def test_every_page_of_the_app_is_its_index_without_a_token(client: FlaskClient, path: str) -> None:
    response = client.get(path, buffered=True)
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert response.get_data(as_text=True) == INDEX
    assert "no-cache" in response.headers["Cache-Control"]


@pytest.mark.usefixtures("built")
def test_built_files_are_served_and_cached_for_good(client: FlaskClient) -> None:
    response = client.get("/assets/index-abc123.js", buffered=True)
    assert response.status_code == 200
    assert response.get_data(as_text=True) == "console.log('app')"
    assert response.cache_control.immutable and response.cache_control.max_age == 365 * 24 * 3600
    stale = client.get("/assets/index-old999.js", buffered=True)  # an asset of an older build is not a page
    assert stale.status_code == 404
    assert stale.json["error"]["message"] == "no file 'assets/index-old999.js' in the web UI"


@pytest.mark.usefixtures("built")
def test_the_api_keeps_its_own_answers(client: FlaskClient) -> None:
    unknown = client.get("/api/v1/no-such-thing", buffered=True)
    assert unknown.status_code == 404 and unknown.json["error"]["code"] == "not_found"
    assert client.get("/api", buffered=True).status_code == 404
    # A method the pages do not take: still the API's 404, not a 405 from the pages' route.
    assert client.post("/api/v1/no-such-thing").status_code == 404
    assert client.post("/jobs").status_code == 405
    # Known endpoints still need their token.
    assert client.get("/api/v1/users", buffered=True).status_code == 401


@pytest.mark.usefixtures("built")
def test_nothing_outside_the_folder_is_served(client: FlaskClient, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    response = client.get("/../secret.txt", buffered=True)
    assert "secret" not in response.get_data(as_text=True)
    encoded = client.get("/%2e%2e/secret.txt", buffered=True)
    assert "secret" not in encoded.get_data(as_text=True)


def test_an_unbuilt_ui_says_how_to_build_it(app: Flask, client: FlaskClient, tmp_path: Path) -> None:
    app.config[WEB_DIR_CONFIG] = str(tmp_path / "empty")
    response = client.get("/jobs", buffered=True)
    assert response.status_code == 404
    assert response.json["error"]["message"].startswith("the web UI is not built: run 'make install'")


def test_the_pages_are_not_in_the_api_document(client: FlaskClient) -> None:
    paths = client.get("/api/v1/openapi.json", buffered=True).json["paths"]
    assert all(path.startswith("/api/v1") for path in paths)
    assert "get" in paths["/api/v1/train_jobs/{app}/{app_version}/trials/changes"]
    assert "post" in paths["/api/v1/trials/{trial_id}/stop"]
    assert "post" in paths["/api/v1/inference_jobs/{job_id}/predict"]
    create = paths["/api/v1/train_jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create["properties"]["strategy"]["enum"][0] == "auto"  # the UI's advisor choices come from here
