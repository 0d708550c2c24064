"""Fixtures for the predictor's tests (the helpers are in ``predictor_world.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from predictor_world import ROOT_LOGIN, World, make_world

from baobab import Settings
from baobab.admin import create_app
from baobab.store import LocalEventChannel, upgrade_database
from baobab.testing import serve_in_thread


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    """A store with a user, on each backend (``db_url``)."""
    world = make_world(db_url, tmp_path / "home")
    yield world
    world.engine.dispose()


@pytest.fixture
def platform(db_url: str, tmp_path: Path) -> Iterator[tuple[World, LocalEventChannel, str]]:
    """A store, and the admin API on loopback (its events on the channel yielded; its SUPERADMIN ``ROOT_LOGIN``)."""
    upgrade_database(db_url)
    settings = Settings.from_env(
        environ={}, home=tmp_path / "home", database_url=db_url, admin_email=ROOT_LOGIN[0], admin_password=ROOT_LOGIN[1]
    )
    events = LocalEventChannel()
    app = create_app(settings, events)  # before the world's user: the first user made is the SUPERADMIN
    world = make_world(db_url, tmp_path / "home")
    with serve_in_thread(app) as url:
        yield world, events, url
    app.extensions["baobab"].engine.dispose()
    world.engine.dispose()
