"""``/api/v1/users``: who may create, list, read, re-role and ban users, and every bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask.testing import FlaskClient

from baobab import Settings
from baobab.store import UserRole

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
ROLES = "SUPERADMIN, ADMIN, MODEL_DEVELOPER, APP_DEVELOPER"


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    return response.json["error"]


def test_create_list_get_and_update(client: FlaskClient, root: Headers, settings: Settings) -> None:
    body = {"email": " Ada@Example.com", "password": "analytical", "role": "MODEL_DEVELOPER"}
    created = client.post("/api/v1/users", json=body, headers=root)
    assert created.status_code == 201, created.json
    ada = created.json
    assert set(ada) == {"id", "email", "role", "banned", "created_at"}
    assert (ada["email"], ada["role"], ada["banned"]) == ("ada@example.com", "MODEL_DEVELOPER", False)

    listed = client.get("/api/v1/users", headers=root)
    assert [u["email"] for u in listed.json["users"]] == [settings.admin_email, "ada@example.com"]
    assert client.get(f"/api/v1/users/{ada['id']}", headers=root).json == ada

    updated = client.patch(f"/api/v1/users/{ada['id']}", json={"role": "ADMIN", "banned": True}, headers=root)
    assert updated.status_code == 200, updated.json
    assert (updated.json["role"], updated.json["banned"]) == ("ADMIN", True)
    assert client.get(f"/api/v1/users/{ada['id']}", headers=root).json == updated.json

    # No answer carries the password or its hash.
    for response in (created, listed, updated):
        assert "password" not in response.get_data(as_text=True)
        assert "scrypt" not in response.get_data(as_text=True)


def test_bad_user_creations(client: FlaskClient, root: Headers, settings: Settings) -> None:
    good = {"email": "grace@example.com", "password": "compiler", "role": "APP_DEVELOPER"}
    cases: list[tuple[Any, int, str, str | None]] = [
        ("not json", 400, "the request body must be a JSON object", None),
        ({**good, "email": None}, 400, "'email' is required", "email"),
        ({k: v for k, v in good.items() if k != "password"}, 400, "'password' is required", "password"),
        ({k: v for k, v in good.items() if k != "role"}, 400, "'role' is required", "role"),
        ({**good, "email": "grace"}, 400, "'grace' is not an email address (expected name@domain)", "email"),
        ({**good, "email": "a b@example.com"}, 400, "is not an email address", "email"),
        ({**good, "email": "x" * 250 + "@example.com"}, 400, "at most 254 are allowed", "email"),
        ({**good, "password": "short"}, 400, "password has 5 characters, at least 8 are required", "password"),
        ({**good, "password": 12345678}, 400, "'password' must be a string, got a number", "password"),
        ({**good, "role": "KING"}, 400, f"'role' is 'KING'; expected one of {ROLES}", "role"),
        ({**good, "role": "admin"}, 400, f"expected one of {ROLES}", "role"),
        ({**good, "role": ["ADMIN"]}, 400, "'role' must be a string, got an array", "role"),
        ({**good, "banned": True}, 400, "unknown field 'banned'; known fields: email, password, role", "banned"),
        ({**good, "email": settings.admin_email.upper()}, 409,
         f"a user with email {settings.admin_email!r} already exists", "email"),
    ]  # fmt: skip
    for body, status, message, field in cases:
        kwargs = {"data": body} if isinstance(body, str) else {"json": body}
        error = error_of(client.post("/api/v1/users", headers=root, **kwargs), status)
        assert message in error["message"], body
        assert error["field"] == field, body
    # None of them left a row behind, and the good body still goes through.
    assert len(client.get("/api/v1/users", headers=root).json["users"]) == 1
    assert client.post("/api/v1/users", json=good, headers=root).status_code == 201


def test_bad_user_updates(client: FlaskClient, root: Headers, add_user: AddUser) -> None:
    dev, _ = add_user(UserRole.APP_DEVELOPER)
    me = client.get("/api/v1/users", headers=root).json["users"][0]
    cases: list[tuple[int, Any, int, str, str | None]] = [
        (dev["id"], {}, 400, "nothing to change: give 'role', 'banned' or both", None),
        (dev["id"], {"banned": "yes"}, 400, "'banned' must be true or false, got 'yes'", "banned"),
        (dev["id"], {"banned": 1}, 400, "'banned' must be true or false, got 1", "banned"),
        (dev["id"], {"role": "KING"}, 400, f"expected one of {ROLES}", "role"),
        (dev["id"], {"email": "new@example.com"}, 400, "unknown field 'email'; known fields: role, banned", "email"),
        (999, {"banned": True}, 404, "no user with id 999", None),
        (me["id"], {"banned": True}, 403, "you cannot ban yourself", "banned"),
        (me["id"], {"role": "ADMIN"}, 403, "you cannot change your own role", "role"),
    ]
    for user_id, body, status, message, field in cases:
        error = error_of(client.patch(f"/api/v1/users/{user_id}", json=body, headers=root), status)
        assert message in error["message"], body
        assert error["field"] == field, body
    assert client.get(f"/api/v1/users/{dev['id']}", headers=root).json == dev  # unchanged
    error = error_of(client.get("/api/v1/users/999", headers=root), 404)
    assert (error["code"], error["message"]) == ("not_found", "no user with id 999")
    # Changing nothing about oneself is allowed: the same role, and not banning.
    same = client.patch(f"/api/v1/users/{me['id']}", json={"role": "SUPERADMIN", "banned": False}, headers=root)
    assert same.status_code == 200 and same.json == me


def test_only_a_superadmin_makes_or_changes_superadmins(client: FlaskClient, root: Headers, add_user: AddUser) -> None:
    admin, admin_auth = add_user(UserRole.ADMIN)
    dev, _ = add_user(UserRole.MODEL_DEVELOPER)
    superadmin = client.get("/api/v1/users", headers=root).json["users"][0]
    denied = "only a SUPERADMIN may {}; you are ADMIN"
    cases: list[tuple[str, str, dict[str, Any], str, str | None]] = [
        ("POST", "/api/v1/users", {"email": "s@example.com", "password": "password-1", "role": "SUPERADMIN"},
         denied.format("create a SUPERADMIN"), "role"),
        ("PATCH", f"/api/v1/users/{dev['id']}", {"role": "SUPERADMIN"}, denied.format("grant the role SUPERADMIN"),
         "role"),
        ("PATCH", f"/api/v1/users/{superadmin['id']}", {"banned": True}, denied.format("change a SUPERADMIN"), None),
        ("PATCH", f"/api/v1/users/{superadmin['id']}", {"role": "ADMIN"}, denied.format("change a SUPERADMIN"), None),
        ("PATCH", f"/api/v1/users/{admin['id']}", {"banned": True}, "you cannot ban yourself", "banned"),
    ]  # fmt: skip
    for method, path, body, message, field in cases:
        error = error_of(client.open(path, method=method, json=body, headers=admin_auth), 403)
        assert (error["message"], error["field"]) == (message, field), body
    assert client.get(f"/api/v1/users/{superadmin['id']}", headers=root).json == superadmin

    # What an ADMIN may do: make developers and admins, re-role and ban non-superadmins.
    body = {"email": "m@example.com", "password": "password-1", "role": "ADMIN"}
    assert client.post("/api/v1/users", json=body, headers=admin_auth).status_code == 201
    change = {"role": "APP_DEVELOPER", "banned": True}
    changed = client.patch(f"/api/v1/users/{dev['id']}", json=change, headers=admin_auth)
    assert (changed.status_code, changed.json["role"], changed.json["banned"]) == (200, "APP_DEVELOPER", True)
    # And a SUPERADMIN may make another one.
    promoted = client.patch(f"/api/v1/users/{admin['id']}", json={"role": "SUPERADMIN"}, headers=root)
    assert promoted.json["role"] == "SUPERADMIN"
