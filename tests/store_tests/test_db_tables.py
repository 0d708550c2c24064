"""The tables and the session scope: constraints, cascades, JSON and time round trips."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, func, select

from baobab.exceptions import StoreError
from baobab.model import ArchKnob, CategoricalKnob, DatasetFormat, FloatKnob, Task, knob_config_to_json
from baobab.store._db import (
    Dataset,
    InferenceJobStatus,
    InterimMetric,
    JobStatus,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    TrialState,
    User,
    UserRole,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)


def _user(email: str = "ada@example.com") -> User:
    return User(email=email, password_hash="x", role=UserRole.APP_DEVELOPER)


def _train_job(engine: Engine, *, app: str = "fashion", app_version: int = 1) -> int:
    """A train job with one sub-job holding two trials, each with a metric and a log line."""
    with session_scope(engine) as session:
        owner = session.scalar(select(User).where(User.email == "ada@example.com")) or _user()
        dataset = Dataset(
            owner=owner, name="train", format=DatasetFormat.TABULAR, artifact_path="d", size_bytes=1, checksum="0"
        )
        template = ModelTemplate(
            owner=owner,
            name="mlp",
            task=Task.TABULAR_CLASSIFICATION,
            class_name="TorchMlp",
            artifact_path="t",
            checksum="0",
            access=ModelAccess.PUBLIC,
            knob_config=knob_config_to_json({"lr": FloatKnob(1e-4, 1e-1, is_exp=True)}),
        )
        job = TrainJob(
            owner=owner,
            app=app,
            app_version=app_version,
            task=Task.TABULAR_CLASSIFICATION,
            train_dataset=dataset,
            val_dataset=dataset,
            budget={"MODEL_TRIAL_COUNT": 2},
        )
        sub_job = SubJob(train_job=job, model_template=template, strategy="random", seed=2**40)
        for number in range(2):
            trial = Trial(sub_job=sub_job, number=number, knobs={"lr": 0.01})
            session.add_all(
                [InterimMetric(trial=trial, step=0, metrics={"loss": 1.0}), TrialLog(trial=trial, line="hi")]
            )
        session.add(job)
    return job.id


def _count(engine: Engine, table: type) -> int:
    with session_scope(engine) as session:
        return session.scalar(select(func.count()).select_from(table))


def test_a_second_user_with_the_same_email_is_refused(engine: Engine) -> None:
    with session_scope(engine) as session:
        session.add(_user())
    with pytest.raises(StoreError, match=r"IntegrityError.*(users\.email|uq_users_email)") as info:
        with session_scope(engine) as session:
            session.add(_user())
    assert "password_hash" not in str(info.value)  # the SQL and its parameters are not quoted
    assert _count(engine, User) == 1


def test_an_app_version_is_taken_once(engine: Engine) -> None:
    _train_job(engine, app="fashion", app_version=1)
    _train_job(engine, app="fashion", app_version=2)
    with pytest.raises(
        StoreError, match=r"IntegrityError.*(train_jobs\.owner_id|uq_train_jobs_owner_id_app_app_version)"
    ):
        _train_job(engine, app="fashion", app_version=2)


def test_a_trial_number_is_taken_once_per_sub_job(engine: Engine) -> None:
    job_id = _train_job(engine)
    with pytest.raises(StoreError, match=r"IntegrityError.*(trials\.sub_job_id|uq_trials_sub_job_id_number)"):
        with session_scope(engine) as session:
            sub_job = session.scalars(select(SubJob).where(SubJob.train_job_id == job_id)).one()
            session.add(Trial(sub_job=sub_job, number=1, knobs={}))


def test_deleting_a_train_job_deletes_its_sub_jobs_trials_metrics_and_logs(engine: Engine) -> None:
    kept = _train_job(engine, app_version=1)
    deleted = _train_job(engine, app_version=2)
    with session_scope(engine) as session:
        session.delete(session.get(TrainJob, deleted))
    assert _count(engine, TrainJob) == 1
    assert (_count(engine, SubJob), _count(engine, Trial)) == (1, 2)
    assert (_count(engine, InterimMetric), _count(engine, TrialLog)) == (2, 2)
    with session_scope(engine) as session:
        assert session.get(TrainJob, kept).sub_jobs[0].trials[1].number == 1


def test_a_dataset_a_job_trained_on_cannot_be_deleted(engine: Engine) -> None:
    job_id = _train_job(engine)
    with pytest.raises(StoreError, match="IntegrityError"):
        with session_scope(engine) as session:
            session.delete(session.get(TrainJob, job_id).train_dataset)
    assert _count(engine, Dataset) == 1


def test_json_columns_keep_1_and_1_0_and_true_apart(engine: Engine) -> None:
    knobs = {"int": 1, "float": 1.0, "bool": True, "none": None, "arch": [3, "conv", 0.5, False], "text": "1"}
    job_id = _train_job(engine)
    with session_scope(engine) as session:
        trial = session.get(TrainJob, job_id).sub_jobs[0].trials[0]
        trial.knobs = knobs
        trial.policies = {"EARLY_STOP": True}
    with session_scope(engine) as session:
        stored = session.get(TrainJob, job_id).sub_jobs[0].trials[0]
        template_config = stored.sub_job.model_template.knob_config
    assert stored.knobs == knobs
    assert [type(stored.knobs[k]) for k in knobs] == [int, float, bool, type(None), list, str]
    assert [type(v) for v in stored.knobs["arch"]] == [int, str, float, bool]
    assert stored.policies == {"EARLY_STOP": True}
    assert template_config == knob_config_to_json({"lr": FloatKnob(1e-4, 1e-1, is_exp=True)})
    # A knob config of every kind round-trips through the Text column unchanged.
    config = knob_config_to_json({"a": ArchKnob([[1, 2], ["x"]]), "c": CategoricalKnob([1, 1.0, True])})
    with session_scope(engine) as session:
        session.get(TrainJob, job_id).sub_jobs[0].model_template.knob_config = config
    with session_scope(engine) as session:
        assert session.get(TrainJob, job_id).sub_jobs[0].model_template.knob_config == config


def test_times_come_back_timezone_aware_in_utc(engine: Engine) -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    job_id = _train_job(engine)
    with session_scope(engine) as session:
        session.get(TrainJob, job_id).started_at = started
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
    assert job.started_at == started
    assert job.started_at.tzinfo is UTC and job.started_at.hour == 1
    assert job.created_at.tzinfo is UTC
    assert abs(datetime.now(UTC) - job.created_at) < timedelta(minutes=5)
    assert job.finished_at is None


def test_a_naive_time_is_refused(engine: Engine) -> None:
    job_id = _train_job(engine)
    with pytest.raises(StoreError, match="naive datetime 2026-01-02T03:04:05: the store keeps timezone-aware"):
        with session_scope(engine) as session:
            session.get(TrainJob, job_id).started_at = datetime(2026, 1, 2, 3, 4, 5)


def test_states_are_stored_as_their_values_with_defaults(engine: Engine) -> None:
    job_id = _train_job(engine)
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
        trial = job.sub_jobs[0].trials[0]
        assert (job.status, job.sub_jobs[0].status, trial.status) == (
            JobStatus.PENDING,
            JobStatus.PENDING,
            TrialState.PENDING,
        )
        assert (trial.attempts, trial.score, trial.policies) == (0, None, {})
        trial.status = TrialState.CANCELLED
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT DISTINCT status FROM trials ORDER BY status").scalars().all() == [
            "CANCELLED",
            "PENDING",
        ]


def test_the_session_scope_rolls_back_when_the_block_raises(engine: Engine) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with session_scope(engine) as session:
            session.add(_user())
            session.flush()
            raise RuntimeError("boom")
    assert _count(engine, User) == 0


@pytest.mark.parametrize(
    ("state", "finished"),
    [(TrialState.PENDING, False), (TrialState.RUNNING, False)]
    + [(s, True) for s in (TrialState.COMPLETED, TrialState.ERRORED, TrialState.STOPPED, TrialState.CANCELLED)],
)
def test_trial_state_is_finished(state: TrialState, finished: bool) -> None:
    assert state.is_finished() is finished


def test_job_states_are_finished_only_at_the_end() -> None:
    assert [s for s in JobStatus if s.is_finished()] == [JobStatus.COMPLETED, JobStatus.ERRORED, JobStatus.STOPPED]
    assert [s for s in InferenceJobStatus if s.is_finished()] == [
        InferenceJobStatus.ERRORED,
        InferenceJobStatus.STOPPED,
    ]


def test_concurrent_read_then_write_sessions_wait_their_turn(db_url: str) -> None:
    """Two engines (as two processes would) read, then write the same row: none fails, none is lost.

    On SQLite this needs BEGIN IMMEDIATE: a deferred transaction that read a row gets
    "database is locked" at its write, without waiting, when the other wrote in between.
    """
    upgrade_database(db_url)
    engines = [create_engine_from_url(db_url) for _ in range(2)]
    with session_scope(engines[0]) as session:
        session.add(User(email="c@example.com", password_hash="0", role=UserRole.ADMIN))

    def increment(engine: Engine) -> None:
        for _ in range(25):
            with session_scope(engine) as session:
                user = session.scalars(select(User).where(User.email == "c@example.com").with_for_update()).one()
                user.password_hash = str(int(user.password_hash) + 1)

    try:
        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(increment, engine) for engine in engines]:
                future.result()
        with session_scope(engines[0]) as session:
            assert session.scalars(select(User.password_hash)).one() == "50"
    finally:
        for engine in engines:
            engine.dispose()


def test_the_store_package_exports_the_metadata_names_without_importing_sqlalchemy_up_front() -> None:
    import subprocess
    import sys

    import baobab.store
    from baobab.store import _db

    assert set(_db.__all__) <= set(baobab.store.__all__)
    assert all(getattr(baobab.store, name) is getattr(_db, name) for name in _db.__all__)
    code = "import sys, baobab.store; print('sqlalchemy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
