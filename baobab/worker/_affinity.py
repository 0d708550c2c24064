"""Data affinity in cluster mode: a trial goes to a worker machine that already holds its job's data.

A worker machine keeps what its trials fetched (datasets, templates, shared parameters in
its artifact cache; decoded datasets in its pool processes), so the next trial of the same
job starts sooner there. The Celery executor therefore sends a trial to the direct queue
of a live worker that has run trials of the job before (Celery's ``worker_direct``; the
one that ran most of them), as long as that worker has room: no more trials running or
waiting for it than its slots and the one queued ahead per slot. Otherwise, or for a job's first trials, the trial goes
to the shared queue, where any worker takes it.

A direct queue has one reader. A trial sent to a worker that then dies would wait there
for good, so the executor watches the workers (Celery's ``inspect``) and sends the
PENDING trials of a worker that is gone to the shared queue again; a second delivery is
harmless (the trial row's rules make it a no-op once the trial is claimed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from baobab.store import SubJob, Trial, TrialState

__all__ = ["choose_node", "job_holders", "node_loads", "node_of"]


def node_of(worker: str) -> str:
    """The worker machine (Celery node name) in a trial's ``worker``: ``w0@host:1234`` -> ``w0@host``."""
    return worker.rsplit(":", 1)[0]


def choose_node(
    holders: Mapping[str, int], capacity: Mapping[str, int], load: Mapping[str, int], *, queue_ahead: int
) -> str | None:
    """The live holder of the job's data that ran most of its trials and has room; ``None`` if none has.

    Ranking by trials run keeps a job on the machine it settled on (its caches are the
    warmest there) instead of spreading it over every machine it ever touched.

    Args:
        holders: worker machines that ran trials of the job, and how many.
        capacity: live worker machines and their slots.
        load: trials running on, or sent to and not yet claimed by, each machine.
        queue_ahead: trials a slot may have waiting besides the one it runs.
    """
    best, best_rank = None, (0, 0)
    for node in sorted(holders):
        room = capacity.get(node, 0) * (1 + queue_ahead) - load.get(node, 0)
        if room > 0 and (holders[node], room) > best_rank:
            best, best_rank = node, (holders[node], room)
    return best


def job_holders(session: Session, train_job_id: int) -> Counter[str]:
    """The worker machines that have run trials of a train job, and how many each."""
    workers = session.scalars(
        select(Trial.worker)
        .join(SubJob, Trial.sub_job_id == SubJob.id)
        .where(SubJob.train_job_id == train_job_id, Trial.worker.is_not(None))
    )
    return Counter(node_of(worker) for worker in workers)


def node_loads(session: Session, running_since: object) -> Counter[str]:
    """RUNNING trials per worker machine, counting those that beat since ``running_since``."""
    workers = session.scalars(
        select(Trial.worker).where(
            Trial.status == TrialState.RUNNING, Trial.worker.is_not(None), Trial.heartbeat_at >= running_since
        )
    )
    return Counter(node_of(worker) for worker in workers)
