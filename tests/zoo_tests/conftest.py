"""Fixtures of the zoo tests: a database on each backend (``db_url``), an artifact store, the admin API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine
from zoo_world import World

from baobab import Settings
from baobab.admin import create_app
from baobab.store import ArtifactStore, create_engine_from_url, upgrade_database
from baobab.testing import serve_in_thread

ROOT_EMAIL = "root@example.com"
ROOT_PASSWORD = "root-password"

Headers = dict[str, str]


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    """Embedded settings on an upgraded database, with a known first SUPERADMIN."""
    upgrade_database(db_url)
    return Settings.from_env(
        environ={}, home=tmp_path, database_url=db_url, admin_email=ROOT_EMAIL, admin_password=ROOT_PASSWORD
    )


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = create_engine_from_url(settings.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def artifacts(settings: Settings) -> ArtifactStore:
    return ArtifactStore(settings.artifacts_url)


@pytest.fixture
def world(engine: Engine, artifacts: ArtifactStore) -> World:
    return World(engine, artifacts)


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    app = create_app(settings)
    yield app
    app.extensions["baobab"].engine.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def login(client: FlaskClient) -> Callable[[str, str], Headers]:
    def login(email: str, password: str) -> Headers:
        response = client.post("/api/v1/tokens", json={"email": email, "password": password})
        assert response.status_code == 201, response.json
        return {"Authorization": f"Bearer {response.json['token']}"}

    return login


@pytest.fixture
def served(app: Flask) -> Iterator[str]:
    """The admin API on a loopback port (real HTTP, for the SDK); its URL."""
    with serve_in_thread(app) as url:
        yield url
