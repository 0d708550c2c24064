"""Schema versions: Alembic run from code, and the check every service makes at start.

The migration scripts ship inside the package (``baobab/store/migrations``), so an
installed Baobab upgrades its database with ``baobab db upgrade`` and no alembic.ini.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from baobab.exceptions import StoreError
from baobab.store._db._engine import create_engine_from_url, describe_url, store_error

__all__ = ["alembic_config", "check_schema", "current_revision", "head_revision", "upgrade_database"]

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's config for the packaged migrations, running on ``connection`` when given."""
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    # env.py runs the migrations on this connection: it carries the engine's SQLite
    # settings (foreign keys, BEGIN IMMEDIATE), and no URL has to go through the
    # config file's %-interpolation.
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The schema revision this Baobab's tables are at."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # a packaging bug, not a user's mistake
        raise StoreError(f"metadata store: no migration scripts in {_MIGRATIONS / 'versions'}")
    return head


def upgrade_database(url: str) -> str:
    """Bring the database at ``url`` to :func:`head_revision`, creating the tables when empty.

    Safe to run again: a database at head is left as it is.

    Returns:
        The revision the database is at afterwards.

    Raises:
        StoreError: the database cannot be reached, or a migration failed (it is
            rolled back where the database supports transactional DDL).
    """
    engine = create_engine_from_url(url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "head")
        with engine.connect() as connection:
            return _revision(connection) or head_revision()
    except SQLAlchemyError as e:
        raise store_error(e, f"upgrading {describe_url(url)}") from e
    except CommandError as e:
        raise StoreError(f"metadata store: upgrading {describe_url(url)} failed: {e}") from e
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at; None when Baobab never upgraded it.

    Raises:
        StoreError: the database cannot be reached.
    """
    engine = create_engine_from_url(url)
    try:
        with engine.connect() as connection:
            return _revision(connection)
    except SQLAlchemyError as e:
        raise store_error(e, f"reading the schema revision of {describe_url(url)}") from e
    finally:
        engine.dispose()


def check_schema(engine: Engine) -> None:
    """Refuse to work on a database whose schema is not the one this Baobab expects.

    Services call this once at start, so that a missed upgrade is one clear message
    and not a missing column in the middle of a job.

    Raises:
        StoreError: the database is behind (run ``baobab db upgrade``), ahead (written
            by a newer Baobab), or cannot be reached.
    """
    try:
        with engine.connect() as connection:
            current = _revision(connection)
    except SQLAlchemyError as e:
        raise store_error(e, f"reading the schema revision of {describe_url(engine)}") from e
    head = head_revision()
    if current == head:
        return
    where = describe_url(engine)
    scripts = ScriptDirectory.from_config(alembic_config())
    try:
        known = current is None or scripts.get_revision(current) is not None
    except CommandError:
        known = False
    if not known:
        raise StoreError(
            f"metadata store: {where} is at schema revision {current!r}, which this Baobab does not know "
            f"(it expects {head!r}); the database was upgraded by a newer Baobab: upgrade Baobab"
        )
    at = "empty (no Baobab tables)" if current is None else f"at schema revision {current!r}"
    raise StoreError(
        f"metadata store: {where} is {at}, this Baobab needs revision {head!r}; "
        "run `baobab db upgrade` (with `--url` for a database other than the default)"
    )


def _revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()
