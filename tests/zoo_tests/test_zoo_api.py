"""``/api/v1/zoo`` (SQLite and PostgreSQL): visibility, uploads and their errors, choosing and recording a parent."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from flask import Flask
from flask.testing import FlaskClient
from zoo_world import World, cnn

from baobab import Settings
from baobab.admin import create_app
from baobab.store import issue_trial_token, params_from_bytes
from baobab.zoo import trace_graph
from baobab.zoo._warm_start import module_params

Headers = dict[str, str]
Users = dict[str, tuple[int, Headers]]
IMAGE = torch.zeros(2, 1, 28, 28)
TASK = "IMAGE_CLASSIFICATION"


@pytest.fixture
def users(client: FlaskClient, login: Callable[[str, str], Headers]) -> dict[str, tuple[int, Headers]]:
    """``root`` (SUPERADMIN), ``ann`` and ``ben`` (developers): ids and Authorization headers."""
    root = login("root@example.com", "root-password")
    found = {"root": (1, root)}
    for name in ("ann", "ben"):
        body = {"email": f"{name}@example.com", "password": "password-123", "role": "MODEL_DEVELOPER"}
        created = client.post("/api/v1/users", json=body, headers=root)
        assert created.status_code == 201, created.json
        found[name] = (created.json["id"], login(body["email"], body["password"]))
    return found


def _upload(client: FlaskClient, headers: Headers, channels: int, *, score: Any = 0.8, **fields: Any) -> Any:
    module = cnn(channels, 2)
    data = {
        "graph": trace_graph(module, IMAGE).dumps(), "score": str(score), "task": TASK, "name": f"cnn-{channels}",
        "file": (io.BytesIO(module_params(module)), "params.safetensors"), **fields,
    }  # fmt: skip
    return client.post("/api/v1/zoo/models", data=data, headers=headers, content_type="multipart/form-data")


def _parent(client: FlaskClient, headers: Headers, channels: int, **extra: Any) -> Any:
    body = {"graph": trace_graph(cnn(channels, 2), IMAGE).to_json(), "task": TASK, **extra}
    return client.post("/api/v1/zoo/parent", json=body, headers=headers)


def test_a_zoo_model_is_seen_by_its_owner_admins_and_everyone_once_public(client: FlaskClient, users: Users) -> None:
    (ann_id, ann), (_, ben), (_, root) = users["ann"], users["ben"], users["root"]
    private = _upload(client, ann, 8)
    assert private.status_code == 201, private.json
    model = private.json
    assert (model["owner_id"], model["access"], model["task"], model["score"]) == (ann_id, "PRIVATE", TASK, 0.8)
    assert (model["name"], model["io_signature"], model["param_count"]) == ("cnn-8", "1x28x28->10", 9146)
    assert model["params_url"] == f"/api/v1/zoo/models/{model['id']}/params" and model["trial_id"] is None
    public = _upload(client, ann, 12, access="PUBLIC").json

    def listed(headers: Headers) -> list[int]:
        return [m["id"] for m in client.get("/api/v1/zoo/models", headers=headers).json["zoo_models"]]

    assert listed(ann) == listed(root) == [public["id"], model["id"]]
    assert listed(ben) == [public["id"]]
    assert client.get(f"/api/v1/zoo/models/{model['id']}", headers=ben).status_code == 404
    assert client.get(f"/api/v1/zoo/models/{model['id']}/params", headers=ben).status_code == 404
    shown = client.get(f"/api/v1/zoo/models/{model['id']}", headers=root).json
    assert shown["graph"]["nodes"][0]["op"] == "conv2d"
    assert client.get("/api/v1/zoo/models?task=TABULAR_REGRESSION", headers=ann).json == {"zoo_models": []}
    assert client.get("/api/v1/zoo/models?tsk=x", headers=ann).json["error"]["field"] == "tsk"


def test_the_zoo_keeps_within_the_budget_of_the_settings(settings: Settings, users: Users) -> None:
    """Three models of about 0.35 MiB each: a budget of 1 MiB (``BAOBAB_ZOO_BUDGET_MB=1``) keeps two."""
    app = create_app(dataclasses.replace(settings, zoo_budget_mb=1))
    try:
        client = app.test_client()
        root = users["root"][1]
        sizes = [_upload(client, root, 48, access="PUBLIC").json["size_bytes"] for _ in range(3)]
        assert sum(sizes[:2]) < 2**20 < sum(sizes)  # two fit, three do not
        kept = client.get("/api/v1/zoo/models", headers=root).json["zoo_models"]
        assert len(kept) == 2
    finally:
        app.extensions["baobab"].engine.dispose()


def test_a_bad_upload_is_a_400_naming_the_field(client: FlaskClient, users: Users) -> None:
    cases = [
        ({"graph": "{not json"}, "graph"),
        ({"graph": json.dumps({"version": 1, "traced": True, "nodes": [{"name": "a"}]})}, "graph.nodes[0].op"),
        ({"score": "high"}, "score"),
        ({"score": "nan"}, "score"),
        ({"task": "SPEECH"}, "task"),
        ({"access": "SHARED"}, "access"),
        ({"file": (io.BytesIO(b"junk"), "p.safetensors")}, "file"),
        ({"colour": "red"}, "colour"),
    ]
    for fields, field in cases:
        answer = _upload(client, users["ann"][1], 8, **fields)
        assert answer.status_code == 400, answer.json
        assert answer.json["error"]["field"] == field
    assert client.get("/api/v1/zoo/models", headers=users["ann"][1]).json == {"zoo_models": []}


def test_choosing_a_parent_answers_its_mapping_graph_and_downloadable_parameters(
    client: FlaskClient, users: Users
) -> None:
    ann, ben = users["ann"][1], users["ben"][1]
    uploaded = _upload(client, ann, 8).json
    offer = _parent(client, ann, 8)
    assert offer.status_code == 200, offer.json
    body = offer.json
    assert (body["zoo_model_id"], body["similarity"], body["matched_share"]) == (uploaded["id"], 1.0, 1.0)
    assert body["mapping"] == [[i, i] for i in range(11)] and body["parent_graph"]["nodes"][10]["op"] == "linear"
    params = client.get(body["params_url"], headers=ann)
    assert params.status_code == 200 and params_from_bytes(params.data)["module.0.weight"].shape == (8, 1, 3, 3)
    nothing = _parent(client, ben, 8).json  # ann's model is private
    assert nothing["zoo_model_id"] is None and nothing["params_url"] is None and "visible" in nothing["reason"]
    assert _parent(client, ann, 8, task="SPEECH").json["error"]["field"] == "task"
    assert _parent(client, ann, 8, graph={"version": 1}).json["error"]["field"] == "graph.traced"
    assert _parent(client, ann, 8, trial_id="one").json["error"]["field"] == "trial_id"


def test_a_trials_worker_chooses_downloads_records_and_registers_with_the_trials_token(
    app: Flask,
    client: FlaskClient,
    users: Users,
    world: World,
) -> None:
    (ann_id, ann), (_, ben) = users["ann"], users["ben"]
    secret = app.extensions["baobab"].settings.signing_key()
    first_job = world.job(ann_id)
    module = cnn(8, 2)
    done = world.trial(first_job)
    world.finish(done, 0.81, module)
    graph = trace_graph(module, IMAGE).to_json()

    def as_worker(trial: int) -> Headers:
        return {"Authorization": f"Bearer {issue_trial_token(secret, trial)}"}

    assert client.post(f"/api/v1/zoo/trials/{done}/model", json={"graph": graph}, headers=ann).status_code == 401
    other = client.post(f"/api/v1/zoo/trials/{done}/model", json={"graph": graph}, headers=as_worker(done + 1))
    assert other.status_code == 403 and "not trial" in other.json["error"]["message"]
    registered = client.post(f"/api/v1/zoo/trials/{done}/model", json={"graph": graph}, headers=as_worker(done))
    assert registered.status_code == 201, registered.json
    zoo_id = registered.json["id"]
    assert (registered.json["trial_id"], registered.json["owner_id"], registered.json["score"]) == (done, ann_id, 0.81)
    running = world.trial(first_job)
    refused = client.post(f"/api/v1/zoo/trials/{running}/model", json={"graph": graph}, headers=as_worker(running))
    assert refused.status_code == 409

    second = world.trial(world.job(ann_id))
    body = {"graph": trace_graph(cnn(12, 2), IMAGE).to_json()}
    offer = client.post(f"/api/v1/zoo/trials/{second}/parent", json=body, headers=as_worker(second)).json
    assert offer["zoo_model_id"] == zoo_id and 0 < offer["similarity"] < 1
    assert offer["params_url"] == f"/api/v1/zoo/trials/{second}/params/{zoo_id}"
    assert client.get(offer["params_url"], headers=as_worker(second)).status_code == 200
    assert client.get(offer["params_url"], headers=ann).status_code == 401  # the worker routes take trial tokens only
    chosen = {"zoo_model_id": zoo_id, "similarity": offer["similarity"]}
    recorded = client.post(f"/api/v1/zoo/trials/{second}/warm_start", json=chosen, headers=as_worker(second))
    assert recorded.status_code == 204
    bad = client.post(
        f"/api/v1/zoo/trials/{second}/warm_start", json={**chosen, "similarity": 2}, headers=as_worker(second)
    )
    assert bad.status_code == 400 and bad.json["error"]["field"] == "similarity"
    trial = client.get(f"/api/v1/trials/{second}", headers=ann).json
    assert (trial["parent_zoo_model_id"], trial["similarity"]) == (zoo_id, offer["similarity"])
    assert client.get(f"/api/v1/zoo/models/{zoo_id}", headers=ann).json["times_chosen"] == 1

    # ben's trial may not start from ann's private model, nor download it
    bens = world.trial(world.job(users["ben"][0]))
    assert (
        client.post(f"/api/v1/zoo/trials/{bens}/parent", json=body, headers=as_worker(bens)).json["zoo_model_id"]
        is None
    )
    assert client.get(f"/api/v1/zoo/trials/{bens}/params/{zoo_id}", headers=as_worker(bens)).status_code == 404
    assert client.post(f"/api/v1/zoo/trials/{bens}/warm_start", json=chosen, headers=as_worker(bens)).status_code == 404
    # a user asking through the user routes for a trial they may see gets the same choice
    assert (
        client.post("/api/v1/zoo/parent", json={**body, "task": TASK, "trial_id": second}, headers=ben).status_code
        == 404
    )
    assert _parent(client, users["root"][1], 12, trial_id=second).json["zoo_model_id"] == zoo_id


def test_the_zoo_routes_are_in_the_openapi_document(client: FlaskClient) -> None:
    paths = client.get("/api/v1/openapi.json").json["paths"]
    for path in ("/api/v1/zoo/models", "/api/v1/zoo/models/{zoo_model_id}/params", "/api/v1/zoo/parent"):
        assert path in paths
    assert paths["/api/v1/zoo/trials/{trial_id}/model"]["post"]["security"] == []  # the trial's token, checked inside
