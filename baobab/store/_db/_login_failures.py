"""Failed-login counters: how many logins failed for a key (an account or a client address) in a window.

The counters live in the metadata store rather than in the API process: in cluster mode
the API runs as several processes (gunicorn workers, replicas), and a limit each process
kept alone would multiply by their number. Both databases the store runs on (SQLite,
PostgreSQL) count with one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` per key, so
concurrent attempts never read the same count.

An attempt is counted *before* the password is checked (:func:`reserve_login_attempt`):
60 wrong passwords sent at once then meet the limit in the order they arrive, instead of
all passing a check made before any of them failed. A login that succeeds gives its
attempt back (:func:`release_login_attempt`). Windows are fixed: the first failure starts
one, and the count starts again at the first attempt after it ends.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import case, delete, literal, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from baobab.store._db._tables import LoginFailures
from baobab.store._db._types import UtcDateTime

__all__ = ["release_login_attempt", "reserve_login_attempt"]

_INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def reserve_login_attempt(
    session: Session, limits: Collection[tuple[str, int]], now: datetime, window: timedelta
) -> float | None:
    """Count one login attempt against each ``(key, limit)``; None while every key is within its limit.

    Returns:
        The seconds until the window of the key that is over its limit ends (the longest
        of them when several are): when the caller may try again.
    """
    cutoff = now - window
    session.execute(delete(LoginFailures).where(LoginFailures.window_started_at <= cutoff))
    insert = _INSERTS[session.get_bind().dialect.name]
    started = literal(now, UtcDateTime())
    wait: float | None = None
    for key, limit in sorted(limits):  # one order for every process: no deadlock between two attempts
        ended = LoginFailures.window_started_at <= cutoff
        statement = (
            insert(LoginFailures)
            .values(key=key, window_started_at=now, failures=1)
            .on_conflict_do_update(
                index_elements=[LoginFailures.key],
                set_={
                    "failures": case((ended, 1), else_=LoginFailures.failures + 1),
                    "window_started_at": case((ended, started), else_=LoginFailures.window_started_at),
                },
            )
            .returning(LoginFailures.failures, LoginFailures.window_started_at)
        )
        failures, window_started_at = session.execute(statement).one()
        if failures > limit:
            left = (window_started_at + window - now).total_seconds()
            wait = left if wait is None else max(wait, left)
    return wait


def release_login_attempt(session: Session, keys: Collection[str]) -> None:
    """Give back the attempt :func:`reserve_login_attempt` counted for ``keys``: the login succeeded."""
    session.execute(
        update(LoginFailures)
        .where(LoginFailures.key.in_(keys), LoginFailures.failures > 0)
        .values(failures=LoginFailures.failures - 1)
    )
