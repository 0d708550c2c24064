"""Fixtures for the metadata database and rows to test on (``db_url`` is in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, select

from baobab.enums import DatasetFormat, ModelAccess, Task, TrialState, UserRole
from baobab.store._db import (
    Dataset,
    ModelTemplate,
    Trial,
    User,
    add_train_job,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a database upgraded to the head revision."""
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    yield engine
    engine.dispose()


@dataclass(frozen=True)
class JobRows:
    """The ids of a train job made by :func:`add_job`."""

    job_id: int
    sub_job_ids: list[int]
    trial_ids: list[int]


def add_job(
    engine: Engine, *, trial_states: Sequence[TrialState] = (), sub_jobs: int = 1, app_version: int = 1
) -> JobRows:
    """A PENDING train job (app ``fashion``) with ``sub_jobs`` sub-jobs; the first holds a trial per state given."""
    with session_scope(engine) as session:
        owner = session.scalar(select(User).where(User.email == "ada@example.com"))
        if owner is None:
            owner = User(email="ada@example.com", password_hash="x", role=UserRole.APP_DEVELOPER)
            session.add(owner)
        dataset = Dataset(
            owner=owner, name="d", format=DatasetFormat.TABULAR, artifact_path="d", size_bytes=1, checksum="0"
        )
        template = ModelTemplate(
            owner=owner,
            name="mlp",
            task=Task.TABULAR_CLASSIFICATION,
            class_name="TorchMlp",
            artifact_path="t",
            checksum="0",
            access=ModelAccess.PUBLIC,
            knob_config="{}",
        )
        session.add_all([dataset, template])
        session.flush()
        job = add_train_job(
            session,
            owner_id=owner.id,
            app="fashion",
            app_version=app_version,
            task=Task.TABULAR_CLASSIFICATION,
            train_dataset_id=dataset.id,
            val_dataset_id=dataset.id,
            budget={"MODEL_TRIAL_COUNT": 2},
            train_args={},
            seed=7,
            sub_jobs=[(template.id, "random")] * sub_jobs,
        )
        first = job.sub_jobs[0]
        trials = [Trial(sub_job_id=first.id, number=n, knobs={}, status=s) for n, s in enumerate(trial_states)]
        session.add_all(trials)
        session.flush()
        return JobRows(job.id, [sub.id for sub in job.sub_jobs], [trial.id for trial in trials])
