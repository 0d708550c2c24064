"""The platform's side of a trial row: insert it, fuse it, ask it to stop, end it, requeue it, note its parent.

The job driver inserts trials (and marks those it submits as one fused group) and
requeues the ones a dead worker or a restart lost;
executors end the ones they cancel or see fail; the zoo notes which model a trial was
warm-started from. (The worker's side, claim, beat and finish, is in ``_trial_rows``.)
Every change of state is conditional on the trial being unfinished, so a final state
someone else stored first (the worker's own outcome, a cancellation) is never
overwritten: each operation says whether it changed the row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from baobab.enums import TrialState
from baobab.store._db._batches import id_batches
from baobab.store._db._engine import changed_rows
from baobab.store._db._tables import SubJob, Trial

__all__ = [
    "end_trial",
    "end_unfinished_trials",
    "fuse_trials",
    "insert_trials",
    "request_trial_stop",
    "requeue_trial",
    "retry_trial_alone",
    "set_trial_parent",
]

_trials = Trial.__table__
_UNFINISHED = _trials.c.status.in_(TrialState.UNFINISHED)


def insert_trials(session: Session, trials: Sequence[Mapping[str, Any]], *, now: datetime) -> list[int]:
    """Insert PENDING trials, submitted at ``now``, in one statement; their ids, in the order given.

    Each mapping holds ``sub_job_id``, ``number``, ``knobs``, ``policies``, ``phase``, ``servable``,
    ``shared_params_path`` and, optionally, ``fusion_profile``. The caller commits them
    before handing the ids to an executor, so a worker never claims a trial that is not in
    the store yet; the job driver inserts every trial one scheduling pass starts at once,
    so the pass costs one statement and one commit, not one of each per trial.
    ``fusion_profile`` asks the worker that runs a trial to measure fusion first
    (``{"max_group": K}``, see ``Trial.fusion_profile``).
    """
    if not trials:
        return []
    rows = [
        {
            "sub_job_id": trial["sub_job_id"],
            "number": trial["number"],
            "knobs": dict(trial["knobs"]),
            "policies": dict(trial["policies"]),
            "phase": trial["phase"],
            "servable": trial["servable"],
            "shared_params_path": trial["shared_params_path"],
            "fusion_profile": None if trial.get("fusion_profile") is None else dict(trial["fusion_profile"]),
            "status": TrialState.PENDING,
            "submitted_at": now,
        }
        for trial in trials
    ]
    # RETURNING in the order of the rows would cost SQLite one statement per row; a trial is known by its
    # sub-job and number (a unique pair), which maps the ids back whatever order they come in.
    statement = insert(_trials).returning(_trials.c.id, _trials.c.sub_job_id, _trials.c.number)
    ids = {(sub_job_id, number): trial_id for trial_id, sub_job_id, number in session.execute(statement, rows)}
    return [ids[row["sub_job_id"], row["number"]] for row in rows]


def fuse_trials(session: Session, trial_ids: Sequence[int]) -> int:
    """Mark the PENDING trials ``trial_ids`` as one fused group, submitted together; the group's id.

    The id is the smallest of ``trial_ids`` (the group's first trial); a trial no longer
    PENDING keeps what it has. Requeuing a member (:func:`requeue_trial`) takes it out again.

    Raises:
        ValueError: fewer than two trials: a group of one is a trial run alone.
    """
    if len(set(trial_ids)) < 2:
        raise ValueError(f"a fused group has at least two trials, got {sorted(set(trial_ids))}")
    group = min(trial_ids)
    statement = (
        update(_trials)
        .where(_trials.c.id.in_(list(trial_ids)), _trials.c.status == TrialState.PENDING)
        .values(fused_group=group)
    )
    session.execute(statement)
    return group


def request_trial_stop(session: Session, trial_id: int, reason: str) -> bool:
    """Leave ``reason`` in an unfinished trial's row: its worker reads it with its next beat and stops early."""
    statement = update(_trials).where(_trials.c.id == trial_id, _UNFINISHED).values(stop_reason=reason)
    return changed_rows(session, statement) == 1


def end_trial(
    session: Session,
    trial_id: int,
    status: TrialState,
    *,
    now: datetime,
    error: str | None = None,
    traceback: str | None = None,
) -> bool:
    """Store the final ``status`` of a trial still PENDING or RUNNING; True if it changed.

    For the platform's own verdicts (a cancellation, a worker that died, a trial lost
    too often); a worker's outcome goes through ``finish_trial``, which checks its claim.
    """
    if not status.is_finished():
        raise ValueError(f"{status} is not a final state")
    statement = (
        update(_trials)
        .where(_trials.c.id == trial_id, _UNFINISHED)
        .values(status=status, error=error, traceback=traceback, finished_at=now)
    )
    return changed_rows(session, statement) == 1


def end_unfinished_trials(
    session: Session, train_job_id: int, status: TrialState, *, error: str, now: datetime
) -> list[int]:
    """Give every unfinished trial of a train job the final ``status``; their ids (for the executor to drop)."""
    if not status.is_finished():
        raise ValueError(f"{status} is not a final state")
    trial_ids = list(
        session.scalars(select(Trial.id).join(Trial.sub_job).where(SubJob.train_job_id == train_job_id, _UNFINISHED))
    )
    for batch in id_batches(trial_ids):
        session.execute(
            update(_trials)
            .where(_trials.c.id.in_(batch), _UNFINISHED)
            .values(status=status, error=error, finished_at=now)
        )
    return trial_ids


def requeue_trial(session: Session, trial_id: int, *, now: datetime) -> bool:
    """Set an unfinished trial PENDING again, submitted at ``now`` (it was lost: to be submitted again).

    The same row and knobs run again, alone: a member of a fused group leaves it (whoever
    requeues submits it by itself). The claim that follows counts one more attempt.
    False when it finished meanwhile: its own outcome counts, and its event follows.
    """
    statement = (
        update(_trials)
        .where(_trials.c.id == trial_id, _UNFINISHED)
        .values(status=TrialState.PENDING, error=None, finished_at=None, submitted_at=now, fused_group=None)
    )
    return changed_rows(session, statement) == 1


def retry_trial_alone(session: Session, trial_id: int, *, now: datetime) -> bool:
    """Set a trial that ended ERRORED PENDING again, to run alone (it ran out of GPU memory beside others).

    Its error goes: running out beside others is no fault of its template. The claim that
    follows counts one more attempt. False when it is not ERRORED (it was not, or another took it).
    """
    statement = (
        update(_trials)
        .where(_trials.c.id == trial_id, _trials.c.status == TrialState.ERRORED)
        .values(
            status=TrialState.PENDING,
            error=None,
            traceback=None,
            finished_at=None,
            submitted_at=now,
            fused_group=None,
            gpu_memory=None,
        )
    )
    return changed_rows(session, statement) == 1


def set_trial_parent(session: Session, trial_id: int, zoo_model_id: int, similarity: float) -> bool:
    """Note on a trial the zoo model it was warm-started from; False when there is no such trial."""
    statement = (
        update(_trials)
        .where(_trials.c.id == trial_id)
        .values(parent_zoo_model_id=zoo_model_id, similarity=float(similarity))
    )
    return changed_rows(session, statement) == 1
