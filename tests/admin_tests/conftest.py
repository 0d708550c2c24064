"""Fixtures for the admin API: a fresh app per test, on SQLite and on PostgreSQL (``db_url``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from baobab import Settings
from baobab.admin import create_app
from baobab.store import UserRole, upgrade_database

ROOT_EMAIL = "root@example.com"
ROOT_PASSWORD = "root-password"
USER_PASSWORD = "user-password"

Headers = dict[str, str]
Login = Callable[[str, str], Headers]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    """Embedded settings on an upgraded database, with a known first SUPERADMIN."""
    upgrade_database(db_url)
    return Settings.from_env(
        environ={}, home=tmp_path, database_url=db_url, admin_email=ROOT_EMAIL, admin_password=ROOT_PASSWORD
    )


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    app = create_app(settings)
    yield app
    app.extensions["baobab"].engine.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def login(client: FlaskClient) -> Login:
    """Logs in through ``POST /api/v1/tokens`` and returns the ``Authorization`` header."""

    def login(email: str, password: str) -> Headers:
        response = client.post("/api/v1/tokens", json={"email": email, "password": password})
        assert response.status_code == 201, response.json
        return {"Authorization": f"Bearer {response.json['token']}"}

    return login


@pytest.fixture
def root(login: Login) -> Headers:
    """The ``Authorization`` header of the first SUPERADMIN."""
    return login(ROOT_EMAIL, ROOT_PASSWORD)


@pytest.fixture
def add_user(client: FlaskClient, root: Headers, login: Login) -> AddUser:
    """Creates a user of a role (as the SUPERADMIN) and returns it with its own ``Authorization`` header."""
    numbers = itertools.count(1)

    def add_user(role: UserRole) -> tuple[dict[str, Any], Headers]:
        email = f"{role.lower()}-{next(numbers)}@example.com"
        body = {"email": email, "password": USER_PASSWORD, "role": role.value}
        response = client.post("/api/v1/users", json=body, headers=root)
        assert response.status_code == 201, response.json
        return response.json, login(email, USER_PASSWORD)

    return add_user
