"""The platform's side of a trial row: insert, fuse, ask to stop, end, requeue, note the parent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from conftest import add_job
from sqlalchemy import Engine

from baobab.enums import TrialState
from baobab.store._db import (
    Trial,
    end_trial,
    end_unfinished_trials,
    fuse_trials,
    insert_trials,
    request_trial_stop,
    requeue_trial,
    session_scope,
    set_trial_parent,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _trial(engine: Engine, trial_id: int) -> Trial:
    with session_scope(engine) as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        return trial


def test_a_trial_is_inserted_pending_and_submitted(engine: Engine) -> None:
    job = add_job(engine)
    with session_scope(engine) as session:
        (trial_id,) = insert_trials(
            session,
            [
                {
                    "sub_job_id": job.sub_job_ids[0],
                    "number": 0,
                    "knobs": {"lr": 0.1},
                    "policies": {"SHARE_PARAMS": True},
                    "phase": "search",
                    "servable": False,
                    "shared_params_path": "params/1",
                }
            ],
            now=NOW,
        )
    trial = _trial(engine, trial_id)
    assert (trial.status, trial.submitted_at, trial.knobs, trial.policies) == (
        TrialState.PENDING,
        NOW,
        {"lr": 0.1},
        {"SHARE_PARAMS": True},
    )
    assert (trial.phase, trial.servable, trial.shared_params_path, trial.attempts) == ("search", False, "params/1", 0)


def test_trials_of_several_sub_jobs_are_inserted_at_once_each_id_in_its_place(engine: Engine) -> None:
    first, second = add_job(engine, sub_jobs=2).sub_job_ids
    rows = [
        {"sub_job_id": sub, "number": number, "knobs": {"x": number}, "policies": {}, "phase": None,
         "servable": True, "shared_params_path": None}
        for number, sub in [(0, second), (0, first), (1, second), (1, first), (2, second)]
    ]  # fmt: skip
    with session_scope(engine) as session:
        ids = insert_trials(session, rows, now=NOW)
    assert len(set(ids)) == len(rows)
    for trial_id, row in zip(ids, rows, strict=True):
        trial = _trial(engine, trial_id)
        assert (trial.sub_job_id, trial.number, trial.knobs, trial.status) == (
            row["sub_job_id"],
            row["number"],
            row["knobs"],
            TrialState.PENDING,
        )


@pytest.mark.parametrize("state", [TrialState.PENDING, TrialState.RUNNING])
def test_an_unfinished_trial_is_ended(engine: Engine, state: TrialState) -> None:
    (trial_id,) = add_job(engine, trial_states=[state]).trial_ids
    with session_scope(engine) as session:
        assert end_trial(session, trial_id, TrialState.ERRORED, now=NOW, error="died", traceback="tb")
    trial = _trial(engine, trial_id)
    assert (trial.status, trial.error, trial.traceback, trial.finished_at) == (TrialState.ERRORED, "died", "tb", NOW)


def test_a_finished_trial_keeps_its_outcome(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.COMPLETED]).trial_ids
    with session_scope(engine) as session:
        assert not end_trial(session, trial_id, TrialState.CANCELLED, now=NOW, error="late")
        assert not request_trial_stop(session, trial_id, "late")
        assert not requeue_trial(session, trial_id, now=NOW)
    trial = _trial(engine, trial_id)
    assert (trial.status, trial.error, trial.stop_reason) == (TrialState.COMPLETED, None, None)


def test_only_a_final_state_ends_a_trial(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.PENDING]).trial_ids
    with session_scope(engine) as session, pytest.raises(ValueError, match="RUNNING is not a final state"):
        end_trial(session, trial_id, TrialState.RUNNING, now=NOW)


def test_a_stop_request_is_left_in_the_row(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.RUNNING]).trial_ids
    with session_scope(engine) as session:
        assert request_trial_stop(session, trial_id, "time is up")
    trial = _trial(engine, trial_id)
    assert (trial.status, trial.stop_reason) == (TrialState.RUNNING, "time is up")


def test_a_lost_trial_is_requeued(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.RUNNING]).trial_ids
    later = NOW + timedelta(minutes=1)
    with session_scope(engine) as session:
        assert requeue_trial(session, trial_id, now=later)
    trial = _trial(engine, trial_id)
    assert (trial.status, trial.error, trial.finished_at, trial.submitted_at) == (TrialState.PENDING, None, None, later)


def test_pending_trials_are_fused_into_a_group_and_a_requeued_member_leaves_it(engine: Engine) -> None:
    states = [TrialState.PENDING, TrialState.PENDING, TrialState.PENDING, TrialState.RUNNING]
    *pending, running = add_job(engine, trial_states=states).trial_ids
    with session_scope(engine) as session:
        group = fuse_trials(session, [pending[2], running, pending[0], pending[1]])
    assert group == min(pending)
    assert [_trial(engine, i).fused_group for i in pending] == [group] * 3
    assert _trial(engine, running).fused_group is None  # no longer PENDING: not taken in
    with session_scope(engine) as session:
        assert requeue_trial(session, pending[1], now=NOW)  # it runs again alone
    assert [_trial(engine, i).fused_group for i in pending] == [group, None, group]


def test_a_group_of_one_is_refused(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.PENDING]).trial_ids
    with session_scope(engine) as session, pytest.raises(ValueError, match=r"at least two trials, got \[\d+\]"):
        fuse_trials(session, [trial_id, trial_id])


def test_the_unfinished_trials_of_one_job_are_ended(engine: Engine) -> None:
    states = [TrialState.PENDING, TrialState.RUNNING, TrialState.COMPLETED]
    job = add_job(engine, trial_states=states)
    other = add_job(engine, trial_states=[TrialState.RUNNING], app_version=2)
    with session_scope(engine) as session:
        ended = end_unfinished_trials(session, job.job_id, TrialState.CANCELLED, error="gone", now=NOW)
    assert sorted(ended) == job.trial_ids[:2]
    assert [_trial(engine, i).status for i in job.trial_ids] == [TrialState.CANCELLED] * 2 + [TrialState.COMPLETED]
    assert _trial(engine, job.trial_ids[0]).error == "gone"
    assert _trial(engine, other.trial_ids[0]).status is TrialState.RUNNING


def test_the_warm_start_parent_is_noted(engine: Engine) -> None:
    (trial_id,) = add_job(engine, trial_states=[TrialState.PENDING]).trial_ids
    with session_scope(engine) as session:
        assert set_trial_parent(session, trial_id, 7, 0.5)
        assert not set_trial_parent(session, trial_id + 1, 7, 0.5)
    trial = _trial(engine, trial_id)
    assert (trial.parent_zoo_model_id, trial.similarity) == (7, 0.5)
