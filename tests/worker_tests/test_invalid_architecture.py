"""A job whose search space holds an architecture that cannot be built, end to end on SQLite and PostgreSQL.

A real job driver runs a real train job on a LocalExecutor (worker processes reporting
through the admin API) with the template ``templates/halves.py``, whose odd ``width``
raises :class:`~baobab.exceptions.InvalidArchitectureError` from ``train()``. Such a
trial ends INVALID with the template's message; it is no error (the job completes, even
with ``max_errors=1``), the strategy is told INVALID, and never proposes it again.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from worker_world import TEMPLATES, Platform, driving

from baobab.advisor import Strategy, TrialRecord, TrialStatus, make_strategy
from baobab.model import Task, check_template, load_template
from baobab.store import (
    Event,
    EventKind,
    JobStatus,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    add_train_job,
    session_scope,
    sub_job_seed,
)
from baobab.testing import wait_until

INVALID_WIDTH = 5
MESSAGE = f"train() raised InvalidArchitectureError: a hidden layer of {INVALID_WIDTH} units cannot be split"


def _seed_proposing_the_invalid_width_first() -> int:
    """A job seed whose sub-job proposes the invalid width for its first trial: were an INVALID
    trial an error, ``max_errors=1`` would give the sub-job up right after it."""
    config = check_template(load_template(TEMPLATES / "halves.py", "Halves"))
    return next(
        seed
        for seed in range(1000)
        if make_strategy("random", config, seed=sub_job_seed(seed, 0)).propose(0)["width"] == INVALID_WIDTH
    )


def _add_job(platform: Platform, events: LocalEventChannel, trial_count: int) -> int:
    template_id = platform.template("halves.py")
    with session_scope(platform.engine) as session:
        job = add_train_job(
            session,
            owner_id=platform.owner_id,
            app=f"halves-{uuid.uuid4().hex[:8]}",
            app_version=1,
            task=Task.TABULAR_CLASSIFICATION,
            train_dataset_id=platform.datasets[0],
            val_dataset_id=platform.datasets[1],
            budget={"MODEL_TRIAL_COUNT": trial_count, "GPU_COUNT": 0},
            train_args={},
            target="y",
            seed=_seed_proposing_the_invalid_width_first(),
            sub_jobs=[(template_id, "random")],
        )
        job_id = job.id
    events.publish(Event(EventKind.JOB_CREATED, job_id))
    return job_id


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Strategy, TrialRecord]]:
    """Every record a strategy observes, with the strategy (the driver keeps its strategies to itself)."""
    seen: list[tuple[Strategy, TrialRecord]] = []
    observe = Strategy.observe

    def spy(self: Strategy, record: TrialRecord) -> None:
        seen.append((self, record))
        observe(self, record)

    monkeypatch.setattr(Strategy, "observe", spy)
    return seen


def test_an_invalid_architecture_ends_its_trial_invalid_and_the_job_completes(
    platform: Platform, told: list[tuple[Strategy, TrialRecord]]
) -> None:
    events = LocalEventChannel()
    trial_count = 4  # the whole space: each width once, the invalid one included
    with driving(platform, events, max_errors=1):
        job_id = _add_job(platform, events, trial_count)
        wait_until(lambda: _job(platform, job_id).status.is_finished(), timeout=120, what="the job to finish")

    job = _job(platform, job_id)
    assert (job.status, job.error) == (JobStatus.COMPLETED, None)
    with session_scope(platform.engine) as session:
        sub = session.scalars(select(SubJob).where(SubJob.train_job_id == job_id)).one()
        trials = list(session.scalars(select(Trial).where(Trial.sub_job_id == sub.id).order_by(Trial.number)))
    assert (sub.status, sub.error) == (JobStatus.COMPLETED, None)

    # The budget counts the invalid trial (it was a proposal); no point is proposed twice.
    assert sorted(t.knobs["width"] for t in trials) == [2, 4, 5, 8]
    (invalid,) = [t for t in trials if t.knobs["width"] == INVALID_WIDTH]
    assert invalid.number == 0  # the first trial, under max_errors=1
    assert invalid.status is TrialState.INVALID and invalid.error is not None
    assert invalid.error.startswith(MESSAGE), invalid.error
    traceback = invalid.traceback or ""  # the template's, kept as an ERRORED trial's is
    assert ", in train" in traceback and traceback.rstrip().endswith("cannot be split into two equal halves")
    assert (invalid.score, invalid.params_path) == (None, None)
    others = [t for t in trials if t is not invalid]
    assert all(t.status is TrialState.COMPLETED and t.score is not None and t.params_path for t in others)

    # The strategy heard of each trial once, the invalid one as INVALID with no score.
    strategies = {id(strategy) for strategy, _ in told}
    assert len(strategies) == 1
    history = told[-1][0].history
    assert [(r.trial_id, r.knobs["width"]) for r in history] == [(t.number, t.knobs["width"]) for t in trials]
    (record,) = [r for r in history if r.knobs["width"] == INVALID_WIDTH]
    assert (record.status, record.score) == (TrialStatus.INVALID, None)
    assert all(r.status is TrialStatus.COMPLETED for r in history if r is not record)


def _job(platform: Platform, job_id: int) -> TrainJob:
    with session_scope(platform.engine) as session:
        return session.get_one(TrainJob, job_id)
