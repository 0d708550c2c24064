"""Engines and the one session scope every metadata change goes through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, CursorResult, make_url
from sqlalchemy.exc import SQLAlchemyError, StatementError
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from baobab.exceptions import StoreError

__all__ = ["changed_rows", "create_engine_from_url", "describe_url", "session_scope", "store_error"]

# How long a SQLite connection waits for another process's write transaction.
_SQLITE_BUSY_TIMEOUT_MS = 30_000


def create_engine_from_url(url: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL, set up for several processes at once.

    SQLite: foreign keys on (SQLite ignores them otherwise), WAL journal (readers never
    wait for the writer), a busy timeout, and every transaction opened with
    ``BEGIN IMMEDIATE``: a transaction that reads and then writes would otherwise fail
    at once with "database is locked" when another process wrote in between, instead
    of waiting its turn. The price: transactions on one SQLite file run one at a time,
    so never hold one session open while another on the same file writes. The folder
    of a SQLite file is created when missing.

    PostgreSQL: a URL that names no driver (``postgresql://``) uses psycopg2, the
    driver Baobab installs (SQLAlchemy 2.1 would pick psycopg 3). Connections are
    checked before use (``pool_pre_ping``), so a restarted server costs a reconnect
    and not an error.

    Raises:
        StoreError: the URL cannot be parsed or names an unknown driver.
    """
    try:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg2")
        if parsed.get_backend_name() != "sqlite":
            return create_engine(parsed, pool_pre_ping=True)
        _make_sqlite_folder(parsed)
        engine = create_engine(parsed)
    except SQLAlchemyError as e:
        # The message of a parse error does not repeat the URL, which may hold a password.
        raise StoreError(f"cannot use database URL: {e}") from e
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _make_sqlite_folder(url: URL) -> None:
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module; _on_sqlite_begin opens them.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    # In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last commits,
    # which a restart treats like lost trials. FULL costs 2-8 ms a commit, most of a trial's overhead.
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def describe_url(engine_or_url: Engine | str) -> str:
    """The database URL with its password masked, fit for messages and logs."""
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    return url.render_as_string(hide_password=True)


def store_error(e: SQLAlchemyError, doing: str) -> StoreError:
    """A StoreError for a database error, quoting the driver's message only.

    SQLAlchemy's own message appends the SQL statement and its parameters, which may
    hold password hashes or API key hashes; the driver's message says what broke
    (for example which unique constraint) without them.

    Args:
        e: the error SQLAlchemy raised.
        doing: what was being done, for the message ("upgrading sqlite:///x.db").
    """
    cause = e.orig if isinstance(e, StatementError) and e.orig is not None else e
    detail = " ".join(str(cause).split())
    # SQLAlchemy's class (IntegrityError, OperationalError) is the same on every database.
    return StoreError(f"metadata store: {doing} failed: {type(e).__name__}: {detail}")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits when the block ends and rolls back when it raises.

    Objects stay readable after the block (``expire_on_commit=False``); they are
    detached snapshots then, so load them again in a new scope to change them.

    Raises:
        StoreError: the database refused the change (a broken constraint, a lost
            connection); the SQLAlchemy error is chained. Other exceptions raised in
            the block pass through unchanged, after the rollback.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except SQLAlchemyError as e:
        session.rollback()
        raise store_error(e, "transaction") from e
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def changed_rows(session: Session, statement: Executable, params: dict[str, Any] | None = None) -> int:
    """Runs an UPDATE or DELETE and says how many rows it changed.

    ``Session.execute`` is typed as returning a ``Result``; for these statements it is a
    ``CursorResult``, the one kind with ``rowcount``, so the cast lives here, once.
    """
    return cast(CursorResult[Any], session.execute(statement, params)).rowcount
