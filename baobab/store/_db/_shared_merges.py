"""Shared weights that add up two trials' trainings: which trial's update, onto which trial's shared weights.

The job driver writes such weights (ENAS's shared trainings that ran at once, see
``baobab.advisor.driver``) and then records them here (:func:`record_shared_merges`); a
trial's lineage reads them back (:func:`shared_merge`). Recording is idempotent: a driver
that replays a job after a restart records again what it finds written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from baobab.store._db._tables import SharedMerge, Trial

__all__ = ["MergeRecord", "record_shared_merges", "shared_merge"]


@dataclass(frozen=True)
class MergeRecord:
    """Weights at ``key``: trial ``trial_id``'s update added onto what its sub-job shared after its trial ``onto``."""

    key: str
    trial_id: int
    onto: int


def record_shared_merges(session: Session, merges: Iterable[MergeRecord]) -> None:
    """Record ``merges`` (those recorded already are kept as they are)."""
    for merge in merges:
        if session.get(SharedMerge, merge.key) is not None:
            continue
        update = aliased(Trial)
        onto_id = session.scalar(
            select(Trial.id)
            .join(update, update.sub_job_id == Trial.sub_job_id)
            .where(update.id == merge.trial_id, Trial.number == merge.onto)
        )
        session.add(SharedMerge(key=merge.key, trial_id=merge.trial_id, onto_trial_id=onto_id, onto_number=merge.onto))


def shared_merge(session: Session, key: str) -> tuple[int, int | None, int] | None:
    """The weights at ``key`` as a merge: the trial whose update they hold, the id (None once gone) and number of the
    trial onto whose shared weights; None when no merge was recorded there (another trial's own parameters)."""
    row = session.get(SharedMerge, key)
    return None if row is None else (row.trial_id, row.onto_trial_id, row.onto_number)
