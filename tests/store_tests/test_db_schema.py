"""Schema versions: upgrades from empty, the start-up check, models equal to migrations."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from baobab.exceptions import StoreError
from baobab.store._db import (
    Base,
    check_schema,
    create_engine_from_url,
    current_revision,
    head_revision,
    upgrade_database,
)


def test_upgrade_from_empty_creates_every_table_at_head(db_url: str) -> None:
    assert current_revision(db_url) is None
    assert upgrade_database(db_url) == head_revision() == "0022"
    assert current_revision(db_url) == head_revision()
    engine = create_engine_from_url(db_url)
    try:
        assert set(inspect(engine).get_table_names()) == set(Base.metadata.tables) | {"alembic_version"}
        check_schema(engine)
    finally:
        engine.dispose()
    # Running it again changes nothing.
    assert upgrade_database(db_url) == head_revision()


def test_check_schema_on_an_empty_database_names_the_upgrade_command(db_url: str) -> None:
    engine = create_engine_from_url(db_url)
    try:
        with pytest.raises(StoreError, match=r"is empty \(no Baobab tables\).*run `baobab db upgrade`"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_check_schema_on_a_database_from_a_newer_baobab_says_to_upgrade_baobab(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match=r"revision '9999', which this Baobab does not know.*upgrade Baobab"):
        check_schema(engine)


def test_the_models_match_the_migrations(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_an_unreachable_database_is_a_store_error() -> None:
    with pytest.raises(StoreError, match=r"metadata store: reading the schema revision of .*OperationalError"):
        current_revision("postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2")


def test_a_url_that_does_not_parse_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot use database URL"):
        create_engine_from_url("not a url")


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(tmp_path) -> None:
    engine = create_engine_from_url(f"sqlite:///{tmp_path / 'sub' / 'baobab.db'}")
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    finally:
        engine.dispose()
