"""The worker's side of a trial row: which outcomes a claim may store, INVALID among them, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from conftest import add_job
from sqlalchemy import Engine, select

from baobab.enums import TrialState
from baobab.store._db import (
    ClaimRefused,
    TrainJob,
    Trial,
    TrialClaim,
    claim_trial,
    end_trial,
    finish_trial,
    insert_trials,
    session_scope,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)
WHY = "train() raised InvalidArchitectureError: a 3x3 feature map cannot take a 5x5 kernel"


def _trial(engine: Engine, trial_id: int) -> Trial:
    with session_scope(engine) as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        return trial


def _claimed(engine: Engine) -> TrialClaim:
    (trial_id,) = add_job(engine, trial_states=[TrialState.PENDING]).trial_ids
    claim = claim_trial(engine, trial_id, "w0", now=NOW)
    assert isinstance(claim, TrialClaim)
    return claim


def test_a_running_trial_ends_invalid_keeping_its_message_and_stays_so(engine: Engine) -> None:
    claim = _claimed(engine)
    stored = finish_trial(
        engine, claim.trial_id, claim.attempt, TrialState.INVALID, now=LATER, error=WHY, traceback="Traceback ..."
    )
    assert stored is TrialState.INVALID
    trial = _trial(engine, claim.trial_id)
    assert (trial.status, trial.error, trial.traceback) == (TrialState.INVALID, WHY, "Traceback ...")
    assert (trial.score, trial.params_path, trial.finished_at) == (None, None, LATER)

    # Final: not claimed again, not overwritten by a late outcome or by the platform.
    refused = claim_trial(engine, claim.trial_id, "w1", now=LATER, stale_after_s=1.0)
    assert refused == ClaimRefused(claim.trial_id, TrialState.INVALID)
    assert finish_trial(engine, claim.trial_id, claim.attempt, TrialState.COMPLETED, now=LATER, score=0.9) is (
        TrialState.INVALID
    )
    with session_scope(engine) as session:
        assert not end_trial(session, claim.trial_id, TrialState.CANCELLED, now=LATER, error="late")
    assert (_trial(engine, claim.trial_id).status, _trial(engine, claim.trial_id).score) == (TrialState.INVALID, None)


def test_a_claim_that_was_taken_over_cannot_end_the_trial_invalid(engine: Engine) -> None:
    claim = _claimed(engine)
    taken = claim_trial(engine, claim.trial_id, "w1", now=NOW + timedelta(seconds=100), stale_after_s=10.0)
    assert isinstance(taken, TrialClaim) and taken.attempt == claim.attempt + 1
    late = finish_trial(engine, claim.trial_id, claim.attempt, TrialState.INVALID, now=LATER, error=WHY)
    assert late is TrialState.RUNNING and _trial(engine, claim.trial_id).error is None


@pytest.mark.parametrize(
    ("status", "score", "message"),
    [
        (TrialState.CANCELLED, None, "a worker ends its trial COMPLETED, ERRORED, INVALID, STOPPED, not CANCELLED"),
        (TrialState.RUNNING, None, "not RUNNING"),
        (TrialState.COMPLETED, None, "a COMPLETED trial needs a score"),
        (TrialState.STOPPED, None, "a STOPPED trial needs a score"),
    ],
)
def test_a_worker_stores_only_an_outcome_of_a_run(
    engine: Engine, status: TrialState, score: float | None, message: str
) -> None:
    claim = _claimed(engine)
    with pytest.raises(ValueError, match=message):
        finish_trial(engine, claim.trial_id, claim.attempt, status, now=LATER, score=score)
    assert _trial(engine, claim.trial_id).status is TrialState.RUNNING


def test_a_trial_that_finished_training_keeps_its_architecture_and_an_unscored_one_none(engine: Engine) -> None:
    record = {"choices": {"deep_fc": "deeper"}, "graph_key": "k", "nodes": [{"name": "x", "inputs": []}]}
    claim, plain = (
        claim_trial(engine, trial_id, "w0", now=NOW)
        for trial_id in add_job(engine, trial_states=[TrialState.PENDING] * 2).trial_ids
    )
    assert isinstance(claim, TrialClaim) and isinstance(plain, TrialClaim)
    with pytest.raises(ValueError, match="only a trial that finished training has an architecture, not INVALID"):
        finish_trial(engine, claim.trial_id, claim.attempt, TrialState.INVALID, now=LATER, architecture=record)
    stored = finish_trial(engine, claim.trial_id, claim.attempt, TrialState.STOPPED, now=LATER, score=0.5,
                          architecture=record)  # fmt: skip
    assert stored is TrialState.STOPPED
    finish_trial(engine, plain.trial_id, plain.attempt, TrialState.COMPLETED, now=LATER, score=0.7)
    with session_scope(engine) as session:
        kept = dict(session.execute(select(Trial.id, Trial.architecture)).tuples().all())
        # SQL NULL, not the JSON text null: "has no architecture" is a plain IS NULL.
        without = set(session.scalars(select(Trial.id).where(Trial.architecture.is_(None))))
    assert kept[claim.trial_id] == record and kept[plain.trial_id] is None
    assert without == {plain.trial_id}


def test_the_jobs_target_reaches_the_claim_and_train_as_a_keyword_argument(engine: Engine) -> None:
    """A tabular job's target column is its own field; train() receives it as ``target=`` with its train args."""
    rows = add_job(engine, trial_states=[TrialState.PENDING, TrialState.PENDING])
    claims = []
    for trial_id, target in zip(rows.trial_ids, ("label", None), strict=True):
        with session_scope(engine) as session:
            job = session.get_one(TrainJob, rows.job_id)
            job.train_args, job.target = {"epochs": 2}, target
        claim = claim_trial(engine, trial_id, "w0", now=NOW)
        assert isinstance(claim, TrialClaim)
        assert TrialClaim.from_json(claim.to_json()) == claim  # what a worker gets through the API
        claims.append(claim)
    named, unnamed = claims
    assert (named.target, named.train_arguments()) == ("label", {"epochs": 2, "target": "label"})
    # None named: train() gets no target and keeps its own default.
    assert (unnamed.target, unnamed.train_arguments()) == (None, {"epochs": 2})


def test_a_fusion_profile_request_reaches_the_claim_and_the_finish_stores_the_measurement(engine: Engine) -> None:
    sub_job_id = add_job(engine).sub_job_ids[0]
    request = {"max_group": 64}
    with session_scope(engine) as session:
        asked, unasked = insert_trials(
            session,
            [
                {"sub_job_id": sub_job_id, "number": n, "knobs": {}, "policies": {}, "phase": None, "servable": True,
                 "shared_params_path": None, "fusion_profile": profile}
                for n, profile in enumerate([request, None])
            ],
            now=NOW,
        )  # fmt: skip
    claim, plain = (claim_trial(engine, trial_id, "w0", now=NOW) for trial_id in (asked, unasked))
    assert isinstance(claim, TrialClaim) and isinstance(plain, TrialClaim)
    assert (claim.fusion_profile, plain.fusion_profile) == (request, None)
    assert TrialClaim.from_json(claim.to_json()) == claim  # what a worker gets through the API
    measured = {**request, "samples_per_s": {"1": 900.0, "16": 2000.0}, "best": 16, "seconds": 2.5, "reason": None}
    # Measured before training, so stored whatever the trial's end.
    finish_trial(engine, asked, claim.attempt, TrialState.ERRORED, now=LATER, error="boom", fusion_profile=measured)
    finish_trial(engine, unasked, plain.attempt, TrialState.COMPLETED, now=LATER, score=0.5)
    assert _trial(engine, asked).fusion_profile == measured
    with session_scope(engine) as session:
        assert set(session.scalars(select(Trial.id).where(Trial.fusion_profile.is_(None)))) == {unasked}
