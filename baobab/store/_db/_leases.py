"""Leases: which holder runs which job, one protocol for train jobs and inference jobs.

Job drivers share the train jobs, and predictor hosts the inference jobs, the same
way: by two columns of the job's row, ``driver`` (the holder's name) and
``lease_expires_at``. A holder takes a job only while its lease is free (nobody's, its
own, or run out), renews its leases well before they run out, and releases them when
it stops cleanly, so that another holder takes the jobs at once rather than when the
leases run out. A holder killed without a word loses its jobs to the others when they
do. A write that changes a job's state together with its lease (a predictor host
taking over a job, or ending one) uses :meth:`Lease.taken` and :data:`RELEASED`, so
the columns are written in one place.

Job drivers share the jobs out evenly: each keeps a row in ``advisors`` renewed with its
leases (:func:`beat_advisor`), and takes up jobs only up to its :func:`fair_share` of the
unfinished ones among the live drivers, handing the excess over when another joins.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from baobab.enums import JobStatus
from baobab.store._db._batches import id_batches
from baobab.store._db._engine import changed_rows
from baobab.store._db._tables import Advisor, InferenceJob, TrainJob

__all__ = ["RELEASED", "Lease", "beat_advisor", "drop_advisor", "fair_share", "job_sharing"]

#: The lease columns of a job nobody holds.
RELEASED: dict[str, Any] = {"driver": None, "lease_expires_at": None}


@dataclass(frozen=True)
class Lease:
    """The leases ``holder`` takes on the rows of ``table``, each for ``duration``."""

    table: type[TrainJob] | type[InferenceJob]
    holder: str
    duration: timedelta

    def free(self, now: datetime) -> ColumnElement[bool]:
        """The jobs this holder may take: nobody's, its own, or another's that ran out."""
        table = self.table
        return or_(table.driver.is_(None), table.driver == self.holder, table.lease_expires_at < now)

    def lapsed_elsewhere(self, now: datetime) -> ColumnElement[bool]:
        """The jobs nobody serves: released, or another's run out (not this holder's own)."""
        table = self.table
        return or_(table.driver.is_(None), and_(table.driver != self.holder, table.lease_expires_at < now))

    def held(self) -> ColumnElement[bool]:
        """The jobs this holder holds."""
        return self.table.driver == self.holder

    def taken(self, now: datetime) -> dict[str, Any]:
        """The lease columns of a job this holder takes (or renews) at ``now``."""
        return {"driver": self.holder, "lease_expires_at": now + self.duration}

    def take(self, session: Session, job_id: int, now: datetime, *where: ColumnElement[bool]) -> bool:
        """Take (or keep) the lease of job ``job_id`` if it is free and matches ``where``."""
        table = self.table
        statement = update(table).where(table.id == job_id, self.free(now), *where).values(**self.taken(now))
        return bool(changed_rows(session, statement))

    def renew(self, session: Session, job_ids: Collection[int], now: datetime, *still: ColumnElement[bool]) -> set[int]:
        """Extend the leases held on ``job_ids``; the ids still held (and matching ``still``).

        A lease another holder took (this one was frozen past its end) is not renewed, and
        its job is missing from the answer: the caller lets it go.
        """
        table = self.table
        ids = list(job_ids)
        until = now + self.duration
        for chunk in id_batches(ids):
            session.execute(update(table).where(table.id.in_(chunk), self.held()).values(lease_expires_at=until))
        kept: set[int] = set()
        for chunk in id_batches(ids):
            kept.update(session.scalars(select(table.id).where(table.id.in_(chunk), self.held(), *still)))
        return kept

    def release(self, session: Session, *where: ColumnElement[bool]) -> int:
        """Hand back the leases this holder holds (on the jobs matching ``where``); how many."""
        table = self.table
        return changed_rows(session, update(table).where(self.held(), *where).values(**RELEASED))


#: How long the row of a job driver that stopped beating (killed without a word) is kept after it expired.
_FORGOTTEN_AFTER = timedelta(hours=1)


def beat_advisor(session: Session, holder: str, until: datetime) -> None:
    """Say that the job driver ``holder`` is alive, and shares the train jobs, until ``until``; the rows of drivers
    long silent go (each start of ``baobab advisor`` has a name of its own, so they would pile up)."""
    if not changed_rows(session, update(Advisor).where(Advisor.name == holder).values(expires_at=until)):
        session.add(Advisor(name=holder, expires_at=until))  # a holder's name is its own: no one else inserts it
    session.execute(delete(Advisor).where(Advisor.expires_at < until - _FORGOTTEN_AFTER))


def drop_advisor(session: Session, holder: str) -> None:
    """The job driver ``holder`` stops: it no longer counts among those sharing the jobs."""
    session.execute(delete(Advisor).where(Advisor.name == holder))


def job_sharing(session: Session, now: datetime) -> tuple[int, int]:
    """How many train jobs are unfinished, and how many job drivers are alive to share them."""
    unfinished = session.scalar(
        select(func.count()).select_from(TrainJob).where(TrainJob.status.in_(JobStatus.UNFINISHED))
    )
    live = session.scalar(select(func.count()).select_from(Advisor).where(Advisor.expires_at >= now))
    return int(unfinished or 0), int(live or 0)


def fair_share(unfinished: int, live: int) -> int:
    """The most jobs one of ``live`` drivers takes of ``unfinished`` ones: together they hold them all."""
    return math.ceil(unfinished / max(live, 1))
