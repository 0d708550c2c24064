"""Train jobs and sub-jobs: add, start, stop, finish, fail; each write only from the state it leaves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from conftest import add_job
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from baobab.enums import JobStatus, TrialState
from baobab.store._db import (
    SubJob,
    TrainJob,
    Trial,
    add_train_job,
    fail_train_job,
    finish_sub_job,
    finish_train_job,
    record_train_job_placement,
    record_train_job_profiling,
    request_train_job_stop,
    session_scope,
    start_train_job,
    sub_job_seed,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _states(engine: Engine, job_id: int) -> tuple[JobStatus, list[JobStatus]]:
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
        assert job is not None
        return job.status, [sub.status for sub in job.sub_jobs]


def test_a_job_is_added_pending_with_its_sub_jobs(engine: Engine) -> None:
    job = add_job(engine, sub_jobs=2)
    assert _states(engine, job.job_id) == (JobStatus.PENDING, [JobStatus.PENDING] * 2)
    with session_scope(engine) as session:
        seeds = list(session.scalars(select(SubJob.seed).where(SubJob.train_job_id == job.job_id).order_by(SubJob.id)))
    assert seeds == [sub_job_seed(7, 0), sub_job_seed(7, 1)]  # derived from the job's seed, one per place
    assert len(set(seeds)) == 2


def test_an_app_version_taken_meanwhile_fails_the_add(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        model = session.get(TrainJob, job.job_id)
        assert model is not None
        with pytest.raises(IntegrityError):
            add_train_job(
                session,
                owner_id=model.owner_id,
                app="fashion",
                app_version=1,
                task=model.task,
                train_dataset_id=model.train_dataset_id,
                val_dataset_id=model.val_dataset_id,
                budget={},
                train_args={},
                seed=7,
                sub_jobs=[],
            )
        session.rollback()


def test_a_job_starts_once_with_its_sub_jobs(engine: Engine) -> None:
    job = add_job(engine, sub_jobs=2)
    with session_scope(engine) as session:
        assert start_train_job(session, job.job_id, now=NOW)
        assert not start_train_job(session, job.job_id, now=NOW)
    assert _states(engine, job.job_id) == (JobStatus.RUNNING, [JobStatus.RUNNING] * 2)
    with session_scope(engine) as session:
        assert session.scalar(select(TrainJob.started_at).where(TrainJob.id == job.job_id)) == NOW


def test_a_stopped_job_is_not_started(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        assert request_train_job_stop(session, job.job_id)
        assert not start_train_job(session, job.job_id, now=NOW)
    assert _states(engine, job.job_id) == (JobStatus.STOPPING, [JobStatus.PENDING])


@pytest.mark.parametrize(
    ("status", "stops"),
    [(JobStatus.PENDING, True), (JobStatus.RUNNING, True), (JobStatus.STOPPING, False), (JobStatus.COMPLETED, False)],
)
def test_only_a_pending_or_running_job_is_set_stopping(engine: Engine, status: JobStatus, stops: bool) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        if status is JobStatus.RUNNING:
            start_train_job(session, job.job_id, now=NOW)
        elif status is not JobStatus.PENDING:
            request_train_job_stop(session, job.job_id)
            if status.is_finished():
                finish_train_job(session, job.job_id, status, None, now=NOW)
    with session_scope(engine) as session:
        assert request_train_job_stop(session, job.job_id) is stops
    assert _states(engine, job.job_id)[0] is (JobStatus.STOPPING if stops else status)


def test_a_sub_job_and_a_job_are_finished_once(engine: Engine) -> None:
    job = add_job(engine, sub_jobs=2)
    with session_scope(engine) as session:
        start_train_job(session, job.job_id, now=NOW)
        assert finish_sub_job(session, job.sub_job_ids[0], JobStatus.ERRORED, "broken")
        assert not finish_sub_job(session, job.sub_job_ids[0], JobStatus.COMPLETED, None)
        assert finish_sub_job(session, job.sub_job_ids[1], JobStatus.COMPLETED, None)
        assert finish_train_job(session, job.job_id, JobStatus.COMPLETED, None, now=NOW)
        assert not finish_train_job(session, job.job_id, JobStatus.STOPPED, None, now=NOW)
    assert _states(engine, job.job_id) == (JobStatus.COMPLETED, [JobStatus.ERRORED, JobStatus.COMPLETED])
    with session_scope(engine) as session:
        row = session.get(TrainJob, job.job_id)
        assert row is not None
        assert (row.finished_at, row.error) == (NOW, None)
        assert session.scalar(select(SubJob.error).where(SubJob.id == job.sub_job_ids[0])) == "broken"


def test_only_a_final_state_finishes_a_job(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session, pytest.raises(ValueError, match="STOPPING is not a final state"):
        finish_train_job(session, job.job_id, JobStatus.STOPPING, None, now=NOW)
    with session_scope(engine) as session, pytest.raises(ValueError, match="RUNNING is not a final state"):
        finish_sub_job(session, job.sub_job_ids[0], JobStatus.RUNNING, None)


def test_a_failed_job_ends_errored_with_its_sub_jobs_and_cancels_its_unfinished_trials(engine: Engine) -> None:
    job = add_job(engine, trial_states=[TrialState.RUNNING, TrialState.COMPLETED, TrialState.PENDING], sub_jobs=2)
    with session_scope(engine) as session:
        start_train_job(session, job.job_id, now=NOW)
        finish_sub_job(session, job.sub_job_ids[1], JobStatus.COMPLETED, None)
    with session_scope(engine) as session:
        cancelled = fail_train_job(session, job.job_id, "no driver can run it", now=NOW)
    assert sorted(cancelled) == [job.trial_ids[0], job.trial_ids[2]]
    assert _states(engine, job.job_id) == (JobStatus.ERRORED, [JobStatus.ERRORED, JobStatus.COMPLETED])
    with session_scope(engine) as session:
        trials = session.execute(select(Trial.status, Trial.error).order_by(Trial.id)).all()
        row = session.get(TrainJob, job.job_id)
        assert row is not None
        assert (row.error, row.finished_at) == ("no driver can run it", NOW)
    assert [tuple(t) for t in trials] == [
        (TrialState.CANCELLED, "no driver can run it"),
        (TrialState.COMPLETED, None),
        (TrialState.CANCELLED, "no driver can run it"),
    ]


def test_a_finished_job_is_not_failed(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        finish_train_job(session, job.job_id, JobStatus.STOPPED, None, now=NOW)
    with session_scope(engine) as session:
        assert fail_train_job(session, job.job_id, "late", now=NOW) == []
    assert _states(engine, job.job_id)[0] is JobStatus.STOPPED


def test_a_job_keeps_the_planner_s_latest_predictions_while_unfinished(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        assert record_train_job_placement(
            session, job.job_id, method="search", fallback="no completed trial of m yet", prediction=None
        )
    with session_scope(engine) as session:
        for k in range(103):
            at = NOW + timedelta(seconds=k)
            prediction = (at, at + timedelta(minutes=10), 0.9)
            record_train_job_placement(session, job.job_id, method="search", fallback=None, prediction=prediction)
    with session_scope(engine) as session:
        placement = session.get(TrainJob, job.job_id).placement
    assert (placement["method"], placement["fallback"]) == ("search", None)
    assert len(placement["predictions"]) == 100  # the latest only
    at, finish, utilisation = placement["predictions"][-1]
    assert datetime.fromisoformat(at) == NOW + timedelta(seconds=102)
    assert datetime.fromisoformat(finish) == NOW + timedelta(seconds=102, minutes=10)
    assert utilisation == 0.9
    with session_scope(engine) as session:
        finish_train_job(session, job.job_id, JobStatus.COMPLETED, None, now=NOW)
        assert not record_train_job_placement(session, job.job_id, method="fcfs", fallback=None, prediction=None)
    with session_scope(engine) as session:
        assert session.get(TrainJob, job.job_id).placement["method"] == "search"  # a finished job's is kept


def test_a_job_keeps_its_profiling_decisions_by_sub_job_beside_the_planner_s_outlook(engine: Engine) -> None:
    job = add_job(engine)
    wait = {"model": "m", "decision": "wait", "reason": "waits", "at": NOW.isoformat()}
    skip = {**wait, "decision": "skip", "reason": "slower fused"}
    with session_scope(engine) as session:
        assert record_train_job_profiling(session, job.job_id, 7, wait)
        assert record_train_job_profiling(session, job.job_id, 8, wait)
        assert record_train_job_profiling(session, job.job_id, 7, skip)  # the latest decision per sub-job
        record_train_job_placement(session, job.job_id, method="search", fallback=None, prediction=None)
    with session_scope(engine) as session:
        placement = session.get(TrainJob, job.job_id).placement
    assert placement["profiling"] == {"7": skip, "8": wait} and placement["method"] == "search"
    with session_scope(engine) as session:
        finish_train_job(session, job.job_id, JobStatus.COMPLETED, None, now=NOW)
        assert not record_train_job_profiling(session, job.job_id, 8, skip)

