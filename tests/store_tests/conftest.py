"""Fixtures for the metadata database; ``db_url`` (SQLite and PostgreSQL) is in ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from baobab.store._db import create_engine_from_url, upgrade_database


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a database upgraded to the head revision."""
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    yield engine
    engine.dispose()
