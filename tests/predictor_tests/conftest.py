"""Fixtures for the predictor's tests (the helpers are in ``predictor_world.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from predictor_world import World, make_world


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    """A store with a user, on each backend (``db_url``)."""
    world = make_world(db_url, tmp_path / "home")
    yield world
    world.engine.dispose()
