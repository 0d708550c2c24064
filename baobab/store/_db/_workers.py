"""The worker machines and what each has: cores, memory and GPUs, as their executor last saw them.

A worker measures its machine when it starts (:func:`baobab.worker.measure_inventory`). The
Celery executor asks every live worker for it with each look at the workers and keeps it
here (:func:`report_workers`), so that the admin API, which never talks to a worker, can
refuse a train job that asks for more than any machine has, and say what there is
(:func:`live_workers`). A row not seen for ``LIVE_S`` is a worker that went; rows silent an
hour are deleted by the next report.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from baobab.store._db._tables import Worker
from baobab.store._resources import Inventory

__all__ = ["LIVE_S", "drop_workers", "live_workers", "report_workers"]

#: A worker not seen for this long is taken to be gone (the executor looks every few seconds).
LIVE_S = 120.0
_FORGOTTEN_AFTER = timedelta(hours=1)


def report_workers(session: Session, seen: Mapping[str, Inventory], now: datetime) -> None:
    """Keep what the live workers ``seen`` (node name -> inventory) have, as seen at ``now``."""
    known = {row.name: row for row in session.scalars(select(Worker).where(Worker.name.in_(list(seen))))}
    for name, inventory in seen.items():
        row = known.get(name)
        if row is None:
            row = Worker(name=name)
            session.add(row)
        row.slots, row.cores, row.memory_mb = inventory.slots, inventory.cores, inventory.memory_mb
        row.devices = {"gpus": inventory.to_json()["gpus"]}
        row.seen_at = now
    session.execute(delete(Worker).where(Worker.seen_at < now - _FORGOTTEN_AFTER))


def drop_workers(session: Session, names: Collection[str]) -> None:
    """The workers ``names`` stopped: they offer nothing any more."""
    session.execute(delete(Worker).where(Worker.name.in_(list(names))))


def live_workers(session: Session, now: datetime) -> dict[str, Inventory]:
    """The workers seen within :data:`LIVE_S` of ``now`` and what each has, by name."""
    rows = session.scalars(
        select(Worker).where(Worker.seen_at >= now - timedelta(seconds=LIVE_S)).order_by(Worker.name)
    )
    return {
        row.name: Inventory.from_json(
            {**(row.devices or {}), "slots": row.slots, "cores": row.cores, "memory_mb": row.memory_mb}
        )
        for row in rows
    }
