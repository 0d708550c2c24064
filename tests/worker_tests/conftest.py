"""The ``platform`` fixture of the worker tests (see worker_world.py), with the admin API its workers report to."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_world import Platform, tabular_frame

from baobab import Settings
from baobab.admin import create_app
from baobab.model import DatasetFormat
from baobab.store import (
    ArtifactStore,
    Dataset,
    User,
    UserRole,
    create_engine_from_url,
    session_scope,
    upgrade_database,
    write_tabular,
)
from baobab.testing import serve_in_thread


@pytest.fixture
def platform(db_url: str, tmp_path: Path, signal_dir: Path) -> Iterator[Platform]:
    upgrade_database(db_url)
    home = tmp_path / "home"
    settings = Settings.from_env(environ={}, home=home, database_url=db_url)
    engine = create_engine_from_url(db_url)
    artifacts = ArtifactStore(settings.artifacts_url)
    platform = Platform(settings, engine, artifacts, signal_dir)
    with session_scope(engine) as session:
        user = User(email="dev@example.com", password_hash="-", role=UserRole.MODEL_DEVELOPER)
        session.add(user)
        session.flush()
        platform.owner_id = user.id
        ids = []
        for name, seed in (("train", 0), ("val", 1)):
            local = write_tabular(tmp_path / f"{name}.csv", tabular_frame(40, seed))
            key = f"datasets/{uuid.uuid4().hex}/data.csv"
            checksum = artifacts.put_file(key, local)
            dataset = Dataset(
                owner_id=user.id,
                name=name,
                format=DatasetFormat.TABULAR,
                artifact_path=key,
                size_bytes=local.stat().st_size,
                checksum=checksum,
            )
            session.add(dataset)
            session.flush()
            ids.append(dataset.id)
        platform.datasets = (ids[0], ids[1])
    with serve_in_thread(create_app(settings)) as url:
        platform.api_url = url
        yield platform
    engine.dispose()
