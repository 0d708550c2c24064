"""The versions of inference jobs: each change a new revision, in order even when two come at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import add_job
from sqlalchemy import Engine, event, func, select, text

from baobab.enums import InferenceJobStatus, RevisionAction, TrialState
from baobab.exceptions import ConflictError, NotFoundError
from baobab.store._db import (
    InferenceJob,
    InferenceMember,
    InferenceRevision,
    InferenceVersion,
    TrainJob,
    VersionSpec,
    add_inference_job,
    inference_revision,
    mark_inference_job_stopped,
    promote_inference_version,
    record_revision_error,
    record_served_revision,
    rollback_inference_revision,
    session_scope,
    set_inference_versions,
)
from baobab.testing import wait_until

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
_LOCK_WAITERS = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"


def _job(engine: Engine) -> tuple[int, list[int]]:
    rows = add_job(engine, trial_states=[TrialState.COMPLETED] * 3)
    with session_scope(engine) as session:
        owner_id = session.scalar(select(TrainJob.owner_id))
        assert owner_id is not None
        job = add_inference_job(
            session, owner_id=owner_id, train_job_id=rows.job_id, api_key_hash="h", public=True,
            trial_ids=rows.trial_ids[:2],
        )  # fmt: skip
        return job.id, rows.trial_ids


def _wanted(engine: Engine, job_id: int) -> tuple[int, list[VersionSpec], int | None]:
    """The wanted revision's number, versions and parent."""
    with session_scope(engine) as session:
        job = session.get(InferenceJob, job_id)
        assert job is not None
        row = inference_revision(session, job_id, job.revision)
        assert row is not None
        return row.number, [VersionSpec.of(v) for v in row.versions], row.parent


def _lock_waiters(engine: Engine) -> int:
    """How many sessions of this PostgreSQL database wait for a lock that another one holds."""
    with engine.connect() as connection:
        return connection.scalar(text(_LOCK_WAITERS)) or 0


def test_a_job_starts_at_revision_1_serving_its_trials_as_v1(engine: Engine) -> None:
    job_id, trials = _job(engine)
    assert _wanted(engine, job_id) == (1, [VersionSpec("v1", 1.0, tuple(trials[:2]))], None)
    with session_scope(engine) as session:
        row = inference_revision(session, job_id, 1)
        assert row is not None and (row.action, row.error) == (RevisionAction.CREATE, None)
        assert inference_revision(session, job_id, 2) is None


def test_set_promote_and_rollback_each_add_a_revision_that_knows_where_to_go_back(engine: Engine) -> None:
    job_id, (a, b, c) = _job(engine)
    canary = [VersionSpec("v1", 0.9, (a, b)), VersionSpec("v2", 0.1, (c,))]
    with session_scope(engine) as session:
        assert set_inference_versions(session, job_id, canary, now=NOW).number == 2
        assert set_inference_versions(session, job_id, list(reversed(canary)), now=NOW).number == 3  # order counts
        assert set_inference_versions(session, job_id, list(reversed(canary)), now=NOW).number == 3  # no change
    assert _wanted(engine, job_id) == (3, list(reversed(canary)), 2)
    with session_scope(engine) as session:
        assert promote_inference_version(session, job_id, "v2", now=NOW).number == 4
        with pytest.raises(NotFoundError, match=f"inference job {job_id} has no version 'v1'; its versions are v2"):
            promote_inference_version(session, job_id, "v1", now=NOW)
    assert _wanted(engine, job_id) == (4, [VersionSpec("v2", 1.0, (c,))], 3)
    with session_scope(engine) as session:
        rollback_inference_revision(session, job_id, now=NOW)
    assert _wanted(engine, job_id) == (5, list(reversed(canary)), 2)
    with session_scope(engine) as session:
        rollback_inference_revision(session, job_id, now=NOW)
        rollback_inference_revision(session, job_id, now=NOW)
    assert _wanted(engine, job_id) == (7, [VersionSpec("v1", 1.0, (a, b))], None)
    with session_scope(engine) as session, pytest.raises(ConflictError, match="has nothing to roll back to"):
        rollback_inference_revision(session, job_id, now=NOW)
    with session_scope(engine) as session:
        actions = session.scalars(select(InferenceRevision.action).order_by(InferenceRevision.number)).all()
    rollout, rollback = RevisionAction.ROLLOUT, RevisionAction.ROLLBACK
    assert actions == [RevisionAction.CREATE, rollout, rollout, RevisionAction.PROMOTE, rollback, rollback, rollback]


def test_two_changes_at_once_get_consecutive_revisions(engine: Engine) -> None:
    """The first change holds the job's row until it commits; the second waits, then builds on it."""
    job_id, (a, b, c) = _job(engine)
    numbers: list[int] = []

    def second() -> None:
        with session_scope(engine) as session:
            numbers.append(rollback_inference_revision(session, job_id, now=NOW).number)  # sees the first's revision

    thread = threading.Thread(target=second)
    beginning = threading.Event()

    def begins(_connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement == "BEGIN IMMEDIATE" and threading.current_thread() is thread:
            beginning.set()

    if engine.dialect.name == "sqlite":
        event.listen(engine, "before_cursor_execute", begins)
    with session_scope(engine) as session:
        numbers.append(set_inference_versions(session, job_id, [VersionSpec("v2", 1.0, (c,))], now=NOW).number)
        thread.start()  # the second change comes in while this transaction is open
        if engine.dialect.name == "sqlite":
            # SQLite lists no waiter anywhere: the last thing to see is the second's BEGIN IMMEDIATE going out
            # while this transaction holds the database (it then waits in SQLite's busy handler).
            wait_until(beginning.is_set, timeout=30, what="the second change to begin its transaction")
        else:
            wait_until(lambda: _lock_waiters(engine), timeout=30, what="the second change to wait for the job's row")
    thread.join(30)
    assert numbers == [2, 3]
    assert _wanted(engine, job_id) == (3, [VersionSpec("v1", 1.0, (a, b))], None)


def test_a_finished_job_keeps_its_versions_and_its_last_served_revision(engine: Engine) -> None:
    job_id, (a, b, c) = _job(engine)
    with session_scope(engine) as session:
        assert record_served_revision(session, job_id, 1)
        set_inference_versions(session, job_id, [VersionSpec("v2", 1.0, (c,))], now=NOW)
        assert record_revision_error(session, job_id, 2, "no member could be loaded")
        assert not record_revision_error(session, job_id, 9, "no such revision")
        assert mark_inference_job_stopped(session, job_id, now=NOW)
    with session_scope(engine) as session:
        for change in (
            lambda: set_inference_versions(session, job_id, [VersionSpec("v3", 1.0, (a,))], now=NOW),
            lambda: promote_inference_version(session, job_id, "v2", now=NOW),
            lambda: rollback_inference_revision(session, job_id, now=NOW),
        ):
            with pytest.raises(ConflictError, match=f"inference job {job_id} is STOPPED; its versions can change only"):
                change()
        assert not record_served_revision(session, job_id, 2)
        job = session.get(InferenceJob, job_id)
        assert job is not None
        assert (job.status, job.revision, job.served_revision) == (InferenceJobStatus.STOPPED, 2, 1)
        row = inference_revision(session, job_id, 2)
        assert row is not None and row.error == "no member could be loaded"
    with session_scope(engine) as session, pytest.raises(NotFoundError, match="no inference job with id 99999"):
        set_inference_versions(session, 99_999, [VersionSpec("v1", 1.0, (a,))], now=NOW)


def test_deleting_a_job_deletes_its_revisions_versions_and_members(engine: Engine) -> None:
    job_id, (a, b, c) = _job(engine)
    with session_scope(engine) as session:
        set_inference_versions(session, job_id, [VersionSpec("v1", 1.0, (a,)), VersionSpec("v2", 1.0, (b, c))], now=NOW)
    with session_scope(engine) as session:
        session.delete(session.get(InferenceJob, job_id))
    with session_scope(engine) as session:
        for table in (InferenceRevision, InferenceVersion, InferenceMember):
            assert session.scalar(select(func.count()).select_from(table)) == 0, table
