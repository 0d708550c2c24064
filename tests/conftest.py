"""Fixtures shared by every test package: an empty database on each backend.

Each PostgreSQL test gets a database of its own (created from the server's
``TEST_POSTGRES_URL`` database, default ``test``, and dropped afterwards), so tests
never see each other's rows. In CI (``CI`` set) an unreachable PostgreSQL fails the
tests that need it; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def _postgres_admin() -> Iterator[Engine]:
    """An AUTOCOMMIT engine on the server's test database, for CREATE/DROP DATABASE."""
    engine = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with engine.connect():
            pass
    except OperationalError as e:
        engine.dispose()
        reason = f"PostgreSQL at {engine.url.render_as_string(hide_password=True)} cannot be reached: {e.orig}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'baobab.db'}"
        return
    admin: Engine = request.getfixturevalue("_postgres_admin")
    name = f"baobab_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
