"""Ids no row can have (issue 21, item 4): in every id path and inside tokens, a 404 or a 401, never a 500."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from itsdangerous import TimestampSigner

from baobab import Settings
from baobab.admin._auth import token_serializer
from baobab.admin._query import MAX_ID

Headers = dict[str, str]
HUGE_IDS = ("9" * 20, str(MAX_ID + 1), "1" + "0" * 5000)


def _id_routes(app: Flask) -> list[tuple[str, str]]:
    """(method, rule) of every route with an ``<int:>`` part."""
    return [
        (method, rule.rule)
        for rule in app.url_map.iter_rules()
        if "<int:" in rule.rule
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
    ]


def _url(rule: str, id_text: str) -> str:
    """``rule`` with every id replaced by ``id_text`` and every other part by ``app``."""
    return re.sub(r"<int:[^>]+>", id_text, re.sub(r"<(?!int:)[^>]+>", "app", rule))


def test_every_id_route_answers_404_for_an_id_no_row_can_have(app: Flask, client: FlaskClient, root: Headers) -> None:
    routes = _id_routes(app)
    assert len(routes) >= 30  # datasets, models, users, jobs, trials, inference jobs, worker, zoo
    for method, rule in routes:
        for huge in HUGE_IDS:
            response = client.open(_url(rule, huge), method=method, headers=root, json={})
            if len(huge) > 4300:  # no number to the router (int() refuses it): no id route matches
                assert response.status_code in (404, 405), (method, rule, response.get_data(as_text=True)[:300])
                continue
            assert response.status_code == 404, (method, rule, response.get_data(as_text=True)[:300])
            assert re.fullmatch(rf"no [a-z ]+ with id {huge}|no train job 'app' version {huge}", _message(response))


def test_the_named_findings_answer_404(client: FlaskClient, root: Headers) -> None:
    huge = "9" * 20
    for method, path in [
        ("GET", f"/api/v1/datasets/{huge}"),
        ("DELETE", f"/api/v1/datasets/{huge}"),
        ("GET", f"/api/v1/models/{huge}"),
        ("GET", f"/api/v1/models/{huge}/file"),
        ("DELETE", f"/api/v1/models/{huge}"),
        ("GET", f"/api/v1/users/{huge}"),
        ("PATCH", f"/api/v1/users/{huge}"),
    ]:
        response = client.open(path, method=method, headers=root, json={"banned": True})
        assert response.status_code == 404, (method, path, response.json)
        assert _message(response).endswith(f" with id {huge}")
    # The nouns are the views' own, and the largest id that can exist still reaches the view.
    assert _message(client.get(f"/api/v1/datasets/{huge}", headers=root)) == f"no dataset with id {huge}"
    assert _message(client.get(f"/api/v1/datasets/{MAX_ID}", headers=root)) == f"no dataset with id {MAX_ID}"
    assert _message(client.get(f"/api/v1/zoo/models/{huge}", headers=root)) == f"no zoo model with id {huge}"
    assert _message(client.get(f"/api/v1/inference_jobs/{huge}", headers=root)) == f"no inference job with id {huge}"
    # The check needs no token: what is not there is not there for anyone.
    assert client.get(f"/api/v1/users/{huge}").status_code == 404


def _message(response: Any) -> str:
    return str(response.json["error"]["message"])


@pytest.mark.parametrize("uid", [MAX_ID + 1, 10**20, -(10**20), 0, -1, True, 1.5, "1", None])
def test_a_token_whose_uid_no_row_can_have_is_refused(client: FlaskClient, settings: Settings, uid: Any) -> None:
    token = token_serializer(settings.signing_key()).dumps({"uid": uid})
    response = client.get("/api/v1/users", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401, response.get_data(as_text=True)
    assert response.json["error"]["message"] == "invalid token: it names no user"


def test_a_token_dated_in_the_future_is_not_yet_valid_rather_than_expired(
    client: FlaskClient, settings: Settings, root: Headers
) -> None:
    uid = client.get("/api/v1/users", headers=root).json["users"][0]["id"]

    class Future(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) + 3600

    serializer = token_serializer(settings.signing_key())
    serializer.signer = Future  # type: ignore[assignment]
    response = client.get("/api/v1/users", headers={"Authorization": f"Bearer {serializer.dumps({'uid': uid})}"})
    assert response.status_code == 401
    message = response.json["error"]["message"]
    assert message.startswith("token not yet valid: it is dated in the future") and "expired" not in message
