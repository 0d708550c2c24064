"""Data affinity in cluster mode: a trial goes to a worker machine that already holds its job's data.

A worker machine keeps what its trials fetched (datasets, templates, shared parameters in
its artifact cache; decoded datasets in its pool processes), so the next trial of the same
job starts sooner there. The Celery executor therefore sends a trial to the direct queue
of a live worker that has run trials of the job before (Celery's ``worker_direct``; the
one that ran most of them) when that worker has a free slot, or when every machine is
busy and it has room for one more trial queued ahead per slot. Otherwise, or for a job's
first trials, the trial goes to the shared queue, where any worker takes it: affinity
never leaves a machine idle while a trial waits elsewhere. A job's first trials can
therefore land on several machines alike; between holders that ran as many of its trials
and have as much room, the job's home, the machine that took its first trial, wins, so
the job settles there instead of swinging between machines on the timing of one trial.

A direct queue has one reader. A trial sent to a worker that then dies would wait there
for good, so the executor watches the workers (Celery's ``inspect``) and sends the
PENDING trials of a worker that is gone to the shared queue again; a second delivery is
harmless (the trial row's rules make it a no-op once the trial is claimed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import func, literal, select, union_all
from sqlalchemy.orm import Session

from baobab.store import SubJob, Trial, TrialState

__all__ = ["affinity_view", "choose_node", "node_of"]


def node_of(worker: str) -> str:
    """The worker machine (Celery node name) in a trial's ``worker``: ``w0@host:1234`` -> ``w0@host``."""
    return worker.rsplit(":", 1)[0]


def choose_node(
    holders: Mapping[str, int],
    capacity: Mapping[str, int],
    load: Mapping[str, int],
    *,
    queue_ahead: int,
    home: str | None = None,
) -> str | None:
    """The live holder of the job's data to send a trial to, or ``None`` for the shared queue.

    Affinity never keeps a trial from a machine that could start it at once: a holder with
    a free slot is chosen; failing that, the trial waits at a busy holder (its queued-ahead
    place) only when no machine at all has a free slot, else it goes to the shared queue,
    where the idle machine takes it. Among holders, the one that ran most of the job's
    trials comes first (its caches are the warmest), then the one with the most room, then
    the job's home.

    Args:
        holders: worker machines that ran trials of the job, and how many.
        capacity: live worker machines and their slots.
        load: trials running on, or sent to and not yet claimed by, each machine.
        queue_ahead: trials a slot may have waiting besides the one it runs.
        home: the machine that took the job's first trial.
    """

    def best(limit: int) -> str | None:
        chosen, chosen_rank = None, (0, 0, False)
        for node in sorted(holders):
            room = capacity.get(node, 0) * limit - load.get(node, 0)
            rank = (holders[node], room, node == home)
            if room > 0 and rank > chosen_rank:
                chosen, chosen_rank = node, rank
        return chosen

    free_holder = best(1)
    if free_holder is not None:
        return free_holder
    if any(load.get(node, 0) < slots for node, slots in capacity.items()):
        return None  # a machine without the job's data is idle: it starts the trial sooner
    return best(1 + queue_ahead)


def affinity_view(
    session: Session, train_job_id: int, running_since: datetime, routed: Mapping[int, str]
) -> tuple[Counter[str], Counter[str], str | None]:
    """What routing a trial of a job needs, read in one round trip: its holders and every machine's load.

    Args:
        train_job_id: the job of the trial to send.
        running_since: a RUNNING trial counts towards its machine's load if it beat since then.
        routed: trials sent to a machine's own queue (trial id -> machine); those still
            PENDING (not yet claimed there) count towards that machine's load too.

    Returns:
        The machines that ran trials of the job and how many each; the trials running
        on or waiting for each machine; the job's home, the machine that ran its first
        trial (the lowest id of those a machine took), or ``None`` before any.
    """
    held = (
        select(Trial.worker, literal("held"), func.count(), func.min(Trial.id))
        .join(SubJob, Trial.sub_job_id == SubJob.id)
        .where(SubJob.train_job_id == train_job_id, Trial.worker.is_not(None))
        .group_by(Trial.worker)
    )
    running = (
        select(Trial.worker, literal("running"), func.count(), literal(0))
        .where(Trial.status == TrialState.RUNNING, Trial.worker.is_not(None), Trial.heartbeat_at >= running_since)
        .group_by(Trial.worker)
    )
    waiting = select(literal(None), literal("waiting"), Trial.id, literal(0)).where(
        Trial.id.in_(routed), Trial.status == TrialState.PENDING
    )
    holders: Counter[str] = Counter()
    load: Counter[str] = Counter()
    home, home_first = None, None
    for worker, kind, value, first in session.execute(union_all(held, running, waiting)):
        if kind == "held":
            holders[node_of(worker)] += value
            if home_first is None or first < home_first:
                home, home_first = node_of(worker), first
        elif kind == "running":
            load[node_of(worker)] += value
        else:  # sent to a machine, not yet claimed there
            load[routed[value]] += 1
    return holders, load, home
