"""JSON bodies the admin API must refuse with a 400 or 413 naming the limit, never a 500 or a stored row
(issue 21: items 5 nesting, 6 size, 7 non-finite numbers, 12 the message for a long integer, and
``options.warm_start``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from conftest import ROOT_EMAIL, ROOT_PASSWORD
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import add_model, job_body, upload_dataset

from baobab import Settings
from baobab.admin import create_app
from baobab.admin._body import MAX_INT_DIGITS, MAX_JSON_DEPTH

Headers = dict[str, str]
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def body(app: Flask, client: FlaskClient, root: Headers) -> dict[str, Any]:
    """A valid train job body of root's."""
    me = client.get("/api/v1/users", headers=root).json["users"][0]["id"]
    data = upload_dataset(client, root)
    return job_body(data, data, [add_model(app.extensions["baobab"].engine, me)])


def _post_job(client: FlaskClient, root: Headers, text: str | bytes) -> Any:
    return client.post("/api/v1/train_jobs", data=text, headers={**root, **JSON})


def _error(response: Any, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    return response.json["error"]


def _no_jobs(client: FlaskClient, root: Headers) -> None:
    assert client.get("/api/v1/train_jobs", headers=root).json["train_jobs"] == []


def test_deep_nesting_is_refused_naming_the_limit(client: FlaskClient, root: Headers, body: dict[str, Any]) -> None:
    limit = f"more than {MAX_JSON_DEPTH} deep"
    deep_arrays = "[" * 100_000 + "]" * 100_000
    assert limit in _error(client.post("/api/v1/tokens", data=deep_arrays, headers=JSON))["message"]
    for opener, closer in (("[", "]"), ('{"a":', "}"), ('[{"a":', "}]")):
        nested = opener * 1000 + "1" + closer * 1000
        text = json.dumps(body)[:-1] + f', "train_args": {{"deep": {nested}}}}}'
        assert limit in _error(_post_job(client, root, text))["message"], opener
    # Unbalanced, so not JSON either: the depth is what the answer names.
    assert limit in _error(_post_job(client, root, "{" * 100_000))["message"]
    _no_jobs(client, root)
    # Brackets inside strings are text, and a shallow structure passes.
    shallow = {"s": "[" * 10_000 + '\\"{', "nested": [[[[{"a": [1]}]]]]}
    response = client.post("/api/v1/train_jobs", json={**body, "train_args": shallow}, headers=root)
    assert response.status_code == 201, response.json
    assert response.json["train_args"] == shallow


@pytest.mark.parametrize(
    ("text", "shown", "field"),
    [
        ('{"lr": NaN}', "NaN", "train_args.lr"),
        ('{"lr": Infinity}', "Infinity", "train_args.lr"),
        ('{"lr": -Infinity}', "-Infinity", "train_args.lr"),
        ('{"lr": 1e999}', "Infinity", "train_args.lr"),
        ('{"opt": {"betas": [0.9, -1e400]}}', "-Infinity", "train_args.opt.betas[1]"),
    ],
)
def test_non_finite_numbers_are_refused_by_field(
    client: FlaskClient, root: Headers, body: dict[str, Any], text: str, shown: str, field: str
) -> None:
    request = json.dumps(body)[:-1] + f', "train_args": {text}}}'
    error = _error(_post_job(client, root, request))
    assert error["field"] == field
    assert error["message"] == f"{field!r} is {shown}, which JSON cannot hold: numbers must be finite"
    _no_jobs(client, root)


def test_non_finite_numbers_are_refused_in_every_json_body(client: FlaskClient, root: Headers) -> None:
    cases = [
        ("POST", "/api/v1/tokens", '{"email": NaN, "password": "x"}', "email"),
        ("POST", "/api/v1/users", '{"email": "a@b.c", "password": "p" , "role": Infinity}', "role"),
        ("POST", "/api/v1/inference_jobs", '{"app": "x", "k": NaN}', "k"),
        ("POST", "/api/v1/zoo/parent", '{"graph": {"w": [NaN]}, "task": "x"}', "graph.w[0]"),
        ("POST", "/api/v1/train_jobs", "NaN", None),
    ]
    for method, path, text, field in cases:
        error = _error(client.open(path, method=method, data=text, headers={**root, **JSON}))
        assert error["field"] == field, path
        assert "numbers must be finite" in error["message"], path


def test_long_integers_are_named_as_such(client: FlaskClient, root: Headers, body: dict[str, Any]) -> None:
    for text in ("9" * 5000, "-" + "9" * 5000, '{"email": ' + "1" * (MAX_INT_DIGITS + 1) + "}"):
        error = _error(client.post("/api/v1/tokens", data=text, headers=JSON))
        assert "integer of" in error["message"] and f"at most {MAX_INT_DIGITS} are allowed" in error["message"]
        assert "JSON object" not in error["message"]
    # Not an object, said with what it is; and not JSON, said with where.
    for text, message in (
        ("12", "the request body must be a JSON object, got a number"),
        ("[1]", "the request body must be a JSON object, got an array"),
        ('"x"', "the request body must be a JSON object, got str"),
        ("{", "the request body is not valid JSON: Expecting property name"),
        (b"\xff\xfe{", "the request body is not valid JSON"),
    ):
        assert _error(client.post("/api/v1/tokens", data=text, headers=JSON))["message"].startswith(message)
    # An id of 19 digits is an integer like any other (and names no row).
    response = client.post("/api/v1/train_jobs", json={**body, "train_dataset_id": 10**18}, headers=root)
    assert _error(response)["field"] == "train_dataset_id"


def test_json_bodies_are_capped_by_setting(settings: Settings, body: dict[str, Any]) -> None:
    small = create_app(dataclasses.replace(settings, max_json_kb=1))
    try:
        client = small.test_client()
        error = _error(client.post("/api/v1/tokens", json={"email": ROOT_EMAIL, "password": "x" * 2000}), status=413)
        assert error["message"] == "the JSON body is larger than the server's limit of 1 KiB (BAOBAB_MAX_JSON_KB)"
        token = client.post("/api/v1/tokens", json={"email": ROOT_EMAIL, "password": ROOT_PASSWORD})
        assert token.status_code == 201
        # Without a Content-Length (chunked), the cap holds as well.
        big = json.dumps({"email": ROOT_EMAIL, "password": "x" * 2000}).encode()
        response = client.post(
            "/api/v1/tokens",
            data=big,
            headers={**JSON, "Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True},
        )
        assert _error(response, 413)["message"].endswith("(BAOBAB_MAX_JSON_KB)")
    finally:
        small.extensions["baobab"].engine.dispose()
    assert Settings.from_env(environ={"BAOBAB_MAX_JSON_KB": "64"}, home=settings.home).max_json_kb == 64


def test_train_args_are_capped_and_left_out_of_listings(
    client: FlaskClient, root: Headers, body: dict[str, Any]
) -> None:
    heavy = {"blob": "x" * 100_000}
    error = _error(client.post("/api/v1/train_jobs", json={**body, "train_args": heavy}, headers=root))
    assert error["field"] == "train_args" and "at most 65536 are allowed" in error["message"]
    _no_jobs(client, root)

    args = {"epochs": 3, "note": "kept"}
    job = client.post("/api/v1/train_jobs", json={**body, "train_args": args}, headers=root).json
    listed = client.get("/api/v1/train_jobs", headers=root).json["train_jobs"]
    assert [j["id"] for j in listed] == [job["id"]] and "train_args" not in listed[0]
    listed = client.get("/api/v1/train_jobs?include=train_args", headers=root).json["train_jobs"]
    assert listed[0]["train_args"] == args
    one = client.get(f"/api/v1/train_jobs/{job['app']}/{job['app_version']}", headers=root).json
    assert one["train_args"] == args
    error = _error(client.get("/api/v1/train_jobs?include=budget", headers=root))
    assert error["field"] == "include" and error["message"] == (
        "query parameter 'include' names 'budget'; it takes train_args"
    )


@pytest.mark.parametrize("value", ["true", 1, 0, [], {}])
def test_warm_start_must_be_a_boolean(client: FlaskClient, root: Headers, body: dict[str, Any], value: Any) -> None:
    response = client.post("/api/v1/train_jobs", json={**body, "options": {"warm_start": value}}, headers=root)
    error = _error(response)
    assert error["field"] == "options.warm_start"
    assert error["message"] == f"options.warm_start: must be true or false, got {value!r}"
    _no_jobs(client, root)
