"""``POST /api/v1/tokens`` and the bearer token every other endpoint needs."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
import requests
from conftest import ROOT_EMAIL, ROOT_PASSWORD, USER_PASSWORD
from flask import Flask
from flask.testing import FlaskClient
from itsdangerous import TimestampSigner

from baobab import Settings
from baobab.admin import TOKEN_MAX_AGE_S, create_app, hash_password, verify_password
from baobab.admin._auth import token_serializer
from baobab.store import UserRole
from baobab.testing import serve_in_thread, wait_until

Headers = dict[str, str]
USER_FIELDS = {"id", "email", "role", "banned", "created_at"}


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    return response.json["error"]


@pytest.mark.production_password_cost
def test_password_hashes_are_salted_scrypt_and_verify() -> None:
    first, second = hash_password("correct horse"), hash_password("correct horse")
    assert first.startswith("scrypt$32768$8$1$") and first != second  # a fresh salt each time
    assert verify_password("correct horse", second)
    assert not verify_password("correct horsE", first)
    assert not verify_password("correct horse", "md5$abc")
    assert not verify_password("correct horse", "scrypt$x$8$1$AA==$AA==")


def test_a_token_for_the_right_password(client: FlaskClient, settings: Settings) -> None:
    # The email is matched without regard to case or surrounding blanks.
    body = {"email": f"  {settings.admin_email.upper()} ", "password": settings.admin_password}
    response = client.post("/api/v1/tokens", json=body)
    assert response.status_code == 201, response.json
    assert response.json["expires_in"] == TOKEN_MAX_AGE_S
    user = response.json["user"]
    assert set(user) == USER_FIELDS
    assert (user["email"], user["role"], user["banned"]) == (settings.admin_email, "SUPERADMIN", False)
    listed = client.get("/api/v1/users", headers={"Authorization": f"Bearer {response.json['token']}"})
    assert listed.status_code == 200
    assert [u["email"] for u in listed.json["users"]] == [settings.admin_email]


def test_bad_token_requests(client: FlaskClient, settings: Settings) -> None:
    email, password = settings.admin_email, settings.admin_password
    cases: list[tuple[dict[str, Any], int, str, str | None]] = [
        ({"data": "email=a&password=b", "content_type": "application/x-www-form-urlencoded"}, 400,
         "the request body must be a JSON object, sent with 'Content-Type: application/json'", None),
        ({"data": "{not json", "content_type": "application/json"}, 400, "the request body is not valid JSON", None),
        ({"json": [email, password]}, 400, "must be a JSON object", None),
        ({"json": {"password": password}}, 400, "'email' is required", "email"),
        ({"json": {"email": email}}, 400, "'password' is required", "password"),
        ({"json": {"email": " ", "password": password}}, 400, "'email' must not be blank", "email"),
        ({"json": {"email": email, "password": ""}}, 400, "'password' must not be blank", "password"),
        ({"json": {"email": 7, "password": password}}, 400, "'email' must be a string, got a number", "email"),
        ({"json": {"email": email, "password": password, "remember": True}}, 400,
         "unknown field 'remember'; known fields: email, password", "remember"),
        ({"json": {"email": email, "password": password + "x"}}, 401, "wrong email or password", None),
        ({"json": {"email": "nobody@example.com", "password": password}}, 401, "wrong email or password", None),
        ({"json": {"email": "not an email", "password": password}}, 401, "wrong email or password", None),
    ]  # fmt: skip
    for request, status, message, field in cases:
        error = error_of(client.post("/api/v1/tokens", **request), status)
        assert message in error["message"], request
        assert error["field"] == field, request
        assert error["code"] == {400: "bad_request", 401: "unauthorized"}[status]


def _expired_signer(*args: Any, **kwargs: Any) -> TimestampSigner:
    class Expired(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - TOKEN_MAX_AGE_S - 60

    return Expired(*args, **kwargs)


def test_endpoints_refuse_missing_malformed_expired_and_forged_tokens(
    client: FlaskClient, settings: Settings, root: Headers
) -> None:
    token = root["Authorization"].removeprefix("Bearer ")
    uid = client.get("/api/v1/users", headers=root).json["users"][0]["id"]
    signed, forged = token_serializer(settings.signing_key()), token_serializer("another key")
    expired = token_serializer(settings.signing_key())
    expired.signer = _expired_signer
    cases: list[tuple[Headers, str]] = [
        ({}, "missing Authorization header: send 'Authorization: Bearer <token>'"),
        ({"Authorization": token}, "malformed Authorization header: expected 'Bearer <token>'"),
        ({"Authorization": f"Basic {token}"}, "malformed Authorization header"),
        ({"Authorization": "Bearer "}, "malformed Authorization header"),
        ({"Authorization": f"Bearer {expired.dumps({'uid': uid})}"}, "token expired"),
        ({"Authorization": f"Bearer {forged.dumps({'uid': uid})}"}, "invalid token: it was not"),
        ({"Authorization": f"Bearer {token[:-2]}xx"}, "invalid token: it was not issued by this server"),
        ({"Authorization": f"Bearer {signed.dumps([uid])}"}, "invalid token: it names no"),
        ({"Authorization": f"Bearer {signed.dumps({'uid': 999, 'gen': 0})}"}, "no longer exists"),
        ({"Authorization": f"Bearer {signed.dumps({'uid': uid})}"}, "invalid token: it has no token generation"),
        ({"Authorization": f"Bearer {signed.dumps({'uid': uid, 'gen': True})}"}, "it has no token generation"),
        ({"Authorization": f"Bearer {signed.dumps({'uid': uid, 'gen': 1})}"}, "token ended: the user was banned"),
    ]
    for headers, message in cases:
        for method, path in (("GET", "/api/v1/users"), ("GET", f"/api/v1/users/{uid}"), ("POST", "/api/v1/users")):
            response = client.open(path, method=method, headers=headers, json={})
            error = error_of(response, 401)
            assert message in error["message"], (headers, path)
            assert response.headers["WWW-Authenticate"] == "Bearer"
    # The scheme's case does not matter, and the real token still works.
    assert client.get("/api/v1/users", headers={"Authorization": f"bearer {token}"}).status_code == 200


@pytest.fixture
def url(app: Flask) -> Iterator[str]:
    """The app on a real HTTP server on loopback."""
    with serve_in_thread(app) as url:
        yield url


def _login(url: str, email: str, password: str, *, source: str = "127.0.0.1") -> requests.Response:
    """``POST /api/v1/tokens`` from the loopback address ``source`` (the whole 127/8 reaches the server)."""
    with requests.Session() as session:
        session.mount("http://", _SourceAdapter(source))
        return session.post(f"{url}/api/v1/tokens", json={"email": email, "password": password}, timeout=60)


class _SourceAdapter(requests.adapters.HTTPAdapter):
    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, source_address=(self.source, 0), **kwargs)


def _bearer(response: requests.Response) -> Headers:
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _refused(response: requests.Response, status: int) -> str:
    assert response.status_code == status, response.text
    message: str = response.json()["error"]["message"]
    return message


def test_a_ban_ends_the_tokens_issued_before_it_even_after_an_unban(
    url: str, root: Headers, add_user: Callable[[UserRole], tuple[dict[str, Any], Headers]]
) -> None:
    user, _ = add_user(UserRole.ADMIN)
    old = _bearer(_login(url, user["email"], USER_PASSWORD))
    users, me = f"{url}/api/v1/users", f"{url}/api/v1/users/{user['id']}"
    assert requests.get(users, headers=old, timeout=30).status_code == 200
    # Unbanning someone who is not banned changes nothing: the token still works.
    assert requests.patch(me, json={"banned": False}, headers=root, timeout=30).status_code == 200
    assert requests.get(users, headers=old, timeout=30).status_code == 200

    assert requests.patch(me, json={"banned": True}, headers=root, timeout=30).status_code == 200
    assert _refused(requests.get(users, headers=old, timeout=30), 401) == f"user {user['email']!r} is banned"
    assert requests.patch(me, json={"banned": False}, headers=root, timeout=30).status_code == 200
    ended = requests.get(users, headers=old, timeout=30)
    assert _refused(ended, 401).startswith("token ended: the user was banned or their role changed")
    assert ended.headers["WWW-Authenticate"] == "Bearer"

    fresh = _bearer(_login(url, user["email"], USER_PASSWORD))
    assert requests.get(users, headers=fresh, timeout=30).status_code == 200
    assert _refused(requests.get(users, headers=old, timeout=30), 401).startswith("token ended")


def test_a_role_change_ends_the_tokens_issued_before_it(
    url: str, root: Headers, add_user: Callable[[UserRole], tuple[dict[str, Any], Headers]]
) -> None:
    user, _ = add_user(UserRole.ADMIN)
    old = _bearer(_login(url, user["email"], USER_PASSWORD))
    users, me = f"{url}/api/v1/users", f"{url}/api/v1/users/{user['id']}"
    # Setting the role it has is no change: the token still works.
    assert requests.patch(me, json={"role": "ADMIN"}, headers=root, timeout=30).status_code == 200
    assert requests.get(users, headers=old, timeout=30).status_code == 200

    demoted = requests.patch(me, json={"role": "APP_DEVELOPER"}, headers=root, timeout=30)
    assert demoted.json()["role"] == "APP_DEVELOPER"
    assert _refused(requests.get(users, headers=old, timeout=30), 401).startswith("token ended")
    # A fresh login acts with the new role; promoting again ends that token in turn.
    fresh = _bearer(_login(url, user["email"], USER_PASSWORD))
    message = _refused(requests.get(users, headers=fresh, timeout=30), 403)
    assert message == f"this needs the role SUPERADMIN or ADMIN; user {user['email']!r} is APP_DEVELOPER"
    assert requests.patch(me, json={"role": "ADMIN"}, headers=root, timeout=30).status_code == 200
    assert _refused(requests.get(users, headers=fresh, timeout=30), 401).startswith("token ended")
    assert _refused(requests.get(users, headers=old, timeout=30), 401).startswith("token ended")
    assert requests.get(users, headers=_bearer(_login(url, user["email"], USER_PASSWORD)), timeout=30).ok


@contextmanager
def _served(settings: Settings, **limits: Any) -> Iterator[str]:
    """An app with other login limits, on loopback; a second one on the same database counts the same failures."""
    app = create_app(dataclasses.replace(settings, **limits))
    try:
        with serve_in_thread(app) as url:
            yield url
    finally:
        app.extensions["baobab"].engine.dispose()


def _retry_after(response: requests.Response, window_s: float) -> int:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == "too_many_requests"
    assert error["message"].startswith("too many failed logins for this account or from this address")
    retry_after = int(response.headers["Retry-After"])
    assert 1 <= retry_after <= math.ceil(window_s)
    assert f"try again in {retry_after} s" in error["message"]
    return retry_after


def test_failed_logins_per_account_are_limited_across_api_processes(settings: Settings) -> None:
    window_s = 10.0
    limits = {"login_failures_per_account": 3, "login_failures_per_address": 1000, "login_failure_window_s": window_s}
    with _served(settings, **limits) as first, _served(settings, **limits) as second:
        root = _bearer(_login(first, ROOT_EMAIL, ROOT_PASSWORD))  # a right password is no failure
        other = {"email": "other@example.com", "password": USER_PASSWORD, "role": "ADMIN"}
        assert requests.post(f"{first}/api/v1/users", json=other, headers=root, timeout=30).status_code == 201
        # 12 wrong passwords at once, spread over two API processes on one database.
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda i: _login((first, second)[i % 2], ROOT_EMAIL, f"wrong-{i}"), range(12)))
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [401] * 3 + [429] * 9, statuses
        for answer in answers:
            if answer.status_code == 429:
                _retry_after(answer, window_s)
        # The account is closed for the window, even to its right password, and on either process...
        _retry_after(_login(second, ROOT_EMAIL, ROOT_PASSWORD), window_s)
        _retry_after(_login(first, f" {ROOT_EMAIL.upper()}", ROOT_PASSWORD), window_s)  # the same account
        # ...but not another account from the same address.
        _bearer(_login(second, "other@example.com", USER_PASSWORD))
        # Once the window ends, the right password works again.
        wait_until(
            lambda: _login(first, ROOT_EMAIL, ROOT_PASSWORD).status_code == 201,
            timeout=window_s + 30,
            interval=0.5,
            what="the end of the failed-login window",
        )


def test_non_admins_may_not_touch_users(
    client: FlaskClient, add_user: Callable[[UserRole], tuple[dict[str, Any], Headers]]
) -> None:
    for role in (UserRole.MODEL_DEVELOPER, UserRole.APP_DEVELOPER):
        user, auth = add_user(role)
        requests = [
            ("GET", "/api/v1/users", None),
            ("GET", f"/api/v1/users/{user['id']}", None),
            ("POST", "/api/v1/users", {"email": "x@example.com", "password": "password-1", "role": "ADMIN"}),
            ("PATCH", f"/api/v1/users/{user['id']}", {"role": "ADMIN"}),
        ]
        for method, path, body in requests:
            error = error_of(client.open(path, method=method, json=body, headers=auth), 403)
            assert error["message"] == f"this needs the role SUPERADMIN or ADMIN; user {user['email']!r} is {role}"
            assert error["code"] == "forbidden"


def test_failed_logins_per_client_address_are_limited(settings: Settings) -> None:
    window_s = 60.0
    limits = {"login_failures_per_account": 1000, "login_failures_per_address": 3, "login_failure_window_s": window_s}
    with _served(settings, **limits) as url:
        # Unknown emails and malformed ones count against the address like wrong passwords.
        for email in ("a@example.com", "b@example.com", "not an email"):
            assert _refused(_login(url, email, "wrong"), 401) == "wrong email or password"
        _retry_after(_login(url, "c@example.com", "wrong"), window_s)
        _retry_after(_login(url, ROOT_EMAIL, ROOT_PASSWORD), window_s)
        # Another client address is not held back: the right password works from there.
        _bearer(_login(url, ROOT_EMAIL, ROOT_PASSWORD, source="127.0.0.2"))
