"""Inference jobs: add, take over, serve, fail, stop; each write only from the state (and lease) it leaves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from conftest import add_job
from sqlalchemy import Engine, select

from baobab.enums import InferenceJobStatus, TrialState
from baobab.store._db import (
    InferenceJob,
    InferenceMember,
    Lease,
    TrainJob,
    add_inference_job,
    delete_finished_inference_job,
    fail_inference_job,
    mark_inference_job_stopped,
    serve_inference_job,
    session_scope,
    take_over_inference_jobs,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _add(engine: Engine, count: int = 1, trial_states: tuple[TrialState, ...] = ()) -> list[int]:
    rows = add_job(engine, trial_states=list(trial_states))
    with session_scope(engine) as session:
        owner_id = session.scalar(select(TrainJob.owner_id))
        assert owner_id is not None
        jobs = [
            add_inference_job(
                session,
                owner_id=owner_id,
                train_job_id=rows.job_id,
                api_key_hash="h",
                public=True,
                trial_ids=rows.trial_ids,
            )
            for _ in range(count)
        ]
        return [job.id for job in jobs]


def _row(engine: Engine, job_id: int) -> InferenceJob:
    with session_scope(engine) as session:
        job = session.get(InferenceJob, job_id)
        assert job is not None
        return job


def _count(engine: Engine) -> int:
    with session_scope(engine) as session:
        return len(session.scalars(select(InferenceJob.id)).all())


def _serving(engine: Engine, job_id: int, lease: Lease) -> None:
    with session_scope(engine) as session:
        assert lease.take(session, job_id, NOW)
        assert serve_inference_job(session, job_id, lease, "http://h:1")


def test_a_job_is_added_starting_with_its_members(engine: Engine) -> None:
    (job_id,) = _add(engine, trial_states=(TrialState.COMPLETED, TrialState.STOPPED))
    job = _row(engine, job_id)
    assert (job.status, job.public, job.api_key_hash, job.driver) == (InferenceJobStatus.STARTING, True, "h", None)
    with session_scope(engine) as session:
        assert len(session.scalars(select(InferenceMember.trial_id)).all()) == 2


def test_the_holder_of_the_lease_serves_a_starting_job(engine: Engine) -> None:
    (job_id,) = _add(engine)
    a, b = Lease(InferenceJob, "a", MINUTE), Lease(InferenceJob, "b", MINUTE)
    with session_scope(engine) as session:
        a.take(session, job_id, NOW)
        assert not serve_inference_job(session, job_id, b, "http://b:1")
        assert serve_inference_job(session, job_id, a, "http://a:1")
        assert not serve_inference_job(session, job_id, a, "http://a:2")
    job = _row(engine, job_id)
    assert (job.status, job.predictor_url, job.error) == (InferenceJobStatus.RUNNING, "http://a:1", None)


def test_a_failed_job_is_errored_and_its_lease_released(engine: Engine) -> None:
    (job_id,) = _add(engine)
    a, b = Lease(InferenceJob, "a", MINUTE), Lease(InferenceJob, "b", MINUTE)
    _serving(engine, job_id, a)
    with session_scope(engine) as session:
        assert not fail_inference_job(session, job_id, b, "not mine", now=NOW)
        assert fail_inference_job(session, job_id, a, "died", now=NOW)
    job = _row(engine, job_id)
    assert (job.status, job.error, job.predictor_url, job.stopped_at) == (InferenceJobStatus.ERRORED, "died", None, NOW)
    assert (job.driver, job.lease_expires_at) == (None, None)


@pytest.mark.parametrize("status", [InferenceJobStatus.STARTING, InferenceJobStatus.RUNNING])
def test_a_live_job_is_stopped_once(engine: Engine, status: InferenceJobStatus) -> None:
    (job_id,) = _add(engine)
    if status is InferenceJobStatus.RUNNING:
        _serving(engine, job_id, Lease(InferenceJob, "a", MINUTE))
    with session_scope(engine) as session:
        assert mark_inference_job_stopped(session, job_id, now=NOW)
        assert not mark_inference_job_stopped(session, job_id, now=NOW + MINUTE)
    job = _row(engine, job_id)
    assert (job.status, job.stopped_at) == (InferenceJobStatus.STOPPED, NOW)


def test_a_stopped_job_is_neither_served_nor_failed(engine: Engine) -> None:
    (job_id,) = _add(engine)
    a = Lease(InferenceJob, "a", MINUTE)
    with session_scope(engine) as session:
        a.take(session, job_id, NOW)
        mark_inference_job_stopped(session, job_id, now=NOW)
        assert not serve_inference_job(session, job_id, a, "http://a:1")
        assert not fail_inference_job(session, job_id, a, "late", now=NOW)
    assert _row(engine, job_id).status is InferenceJobStatus.STOPPED


def test_running_jobs_nobody_serves_are_taken_over_and_started_again(engine: Engine) -> None:
    released, lapsed, others, own, elsewhere = _add(engine, 5)
    a, b = Lease(InferenceJob, "a", MINUTE), Lease(InferenceJob, "b", MINUTE)
    for job_id in (released, lapsed, others):
        _serving(engine, job_id, b)
    _serving(engine, own, a)
    _serving(engine, elsewhere, b)
    with session_scope(engine) as session:
        b.release(session, InferenceJob.id.in_([released, elsewhere]))
    later = NOW + 2 * MINUTE
    with session_scope(engine) as session:
        b.take(session, others, later)  # renewed: still served
        a.take(session, own, later)
        assert take_over_inference_jobs(session, a, now=later, job_ids=[released, lapsed, others, own]) == 2
    for job_id in (released, lapsed):
        job = _row(engine, job_id)
        assert (job.status, job.predictor_url, job.driver, job.lease_expires_at) == (
            InferenceJobStatus.STARTING,
            None,
            "a",
            later + MINUTE,
        )
    assert [(_row(engine, i).status, _row(engine, i).driver) for i in (others, own, elsewhere)] == [
        (InferenceJobStatus.RUNNING, "b"),
        (InferenceJobStatus.RUNNING, "a"),
        (InferenceJobStatus.RUNNING, None),
    ]


def test_a_job_keeps_its_request_log_rate_and_only_a_finished_one_is_deleted_with_its_members(engine: Engine) -> None:
    (logged,) = _add(engine, trial_states=(TrialState.COMPLETED,))
    with session_scope(engine) as session:
        owner_id, train_job_id = session.execute(select(TrainJob.owner_id, TrainJob.id)).one()
        sampled = add_inference_job(
            session,
            owner_id=owner_id,
            train_job_id=train_job_id,
            api_key_hash="h",
            public=False,
            trial_ids=[],
            request_log_rate=0.25,
        ).id
    assert (_row(engine, logged).request_log_rate, _row(engine, sampled).request_log_rate) == (0.0, 0.25)

    lease = Lease(InferenceJob, "a", MINUTE)
    _serving(engine, logged, lease)
    with session_scope(engine) as session:
        assert not delete_finished_inference_job(session, logged)  # RUNNING
        assert not delete_finished_inference_job(session, 99_999)
    with session_scope(engine) as session:
        assert mark_inference_job_stopped(session, logged, now=NOW)
    with session_scope(engine) as session:
        assert delete_finished_inference_job(session, logged)
    with session_scope(engine) as session:
        assert session.get(InferenceJob, logged) is None
        assert session.scalars(select(InferenceMember.trial_id)).all() == []  # the members went with it
        assert session.get(InferenceJob, sampled) is not None
        assert not delete_finished_inference_job(session, sampled)  # STARTING
    with session_scope(engine) as session:  # ERRORED is finished too
        assert lease.take(session, sampled, NOW)
        assert fail_inference_job(session, sampled, lease, "the predictor exited", now=NOW)
    with session_scope(engine) as session:
        assert delete_finished_inference_job(session, sampled)
    assert _count(engine) == 0
