"""``POST /api/v1/tokens`` and the bearer token every other endpoint needs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flask.testing import FlaskClient
from itsdangerous import TimestampSigner

from baobab import Settings
from baobab.admin import TOKEN_MAX_AGE_S, hash_password, verify_password
from baobab.admin._auth import token_serializer
from baobab.store import UserRole

Headers = dict[str, str]
USER_FIELDS = {"id", "email", "role", "banned", "created_at"}


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    return response.json["error"]


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
        ({"Authorization": f"Bearer {signed.dumps({'uid': 999})}"}, "no longer exists"),
    ]
    for headers, message in cases:
        for method, path in (("GET", "/api/v1/users"), ("GET", f"/api/v1/users/{uid}"), ("POST", "/api/v1/users")):
            response = client.open(path, method=method, headers=headers, json={})
            error = error_of(response, 401)
            assert message in error["message"], (headers, path)
            assert response.headers["WWW-Authenticate"] == "Bearer"
    # The scheme's case does not matter, and the real token still works.
    assert client.get("/api/v1/users", headers={"Authorization": f"bearer {token}"}).status_code == 200


def test_a_ban_and_a_new_role_apply_to_existing_tokens_at_once(
    client: FlaskClient,
    root: Headers,
    add_user: Callable[[UserRole], tuple[dict[str, Any], Headers]],
    login: Callable[[str, str], Headers],
) -> None:
    admin, admin_auth = add_user(UserRole.ADMIN)
    assert client.get("/api/v1/users", headers=admin_auth).status_code == 200

    assert client.patch(f"/api/v1/users/{admin['id']}", json={"banned": True}, headers=root).status_code == 200
    error = error_of(client.get("/api/v1/users", headers=admin_auth), 401)
    assert error["message"] == f"user {admin['email']!r} is banned"
    credentials = {"email": admin["email"], "password": "user-password"}
    login_error = error_of(client.post("/api/v1/tokens", json=credentials), 401)
    assert login_error["message"] == f"user {admin['email']!r} is banned"

    assert client.patch(f"/api/v1/users/{admin['id']}", json={"banned": False}, headers=root).status_code == 200
    assert client.get("/api/v1/users", headers=admin_auth).status_code == 200

    demoted = client.patch(f"/api/v1/users/{admin['id']}", json={"role": "APP_DEVELOPER"}, headers=root)
    assert demoted.json["role"] == "APP_DEVELOPER"
    error = error_of(client.get("/api/v1/users", headers=admin_auth), 403)
    assert error["message"] == f"this needs the role SUPERADMIN or ADMIN; user {admin['email']!r} is APP_DEVELOPER"
    assert client.patch(f"/api/v1/users/{admin['id']}", json={"role": "ADMIN"}, headers=root).status_code == 200
    assert client.get("/api/v1/users", headers=admin_auth).status_code == 200
    assert login(admin["email"], "user-password")  # and it can log in again


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
