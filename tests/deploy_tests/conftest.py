"""Fixtures of the deploy tests: a store with jobs in it, and an emulated Kubernetes API.

``kube`` is NOT a Kubernetes cluster: it is kmock's ``KubernetesEmulator``, an in-memory
store of objects behind the Kubernetes REST API on a loopback port (no scheduler, no
pods, no label-selector filtering, patches are plain JSON merges). It is enough to check
which API calls the kubernetes executor makes and what objects it leaves behind.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kmock
import pytest
from kubernetes import client
from sqlalchemy import Engine, update

from baobab.model import DatasetFormat, Task
from baobab.store import (
    Dataset,
    InferenceJob,
    InferenceJobStatus,
    JobStatus,
    TrainJob,
    User,
    UserRole,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)


@dataclass
class Jobs:
    """Train and inference job rows, as the API and the advisor would write them."""

    engine: Engine
    owner_id: int
    dataset_id: int

    def train(self, gpus: int = 0, status: JobStatus = JobStatus.RUNNING, options: dict[str, Any] | None = None) -> int:
        with session_scope(self.engine) as session:
            job = TrainJob(
                owner_id=self.owner_id,
                app=f"app-{uuid.uuid4().hex[:8]}",
                app_version=1,
                task=Task.TABULAR_CLASSIFICATION,
                train_dataset_id=self.dataset_id,
                val_dataset_id=self.dataset_id,
                budget={"GPU_COUNT": gpus, "MODEL_TRIAL_COUNT": 10},
                options=options or {},
                status=status,
            )
            session.add(job)
            session.flush()
            return job.id

    def serve(self, train_job_id: int) -> int:
        with session_scope(self.engine) as session:
            job = InferenceJob(owner_id=self.owner_id, train_job_id=train_job_id)
            session.add(job)
            session.flush()
            return job.id

    def end_train(self, job_id: int, status: JobStatus = JobStatus.COMPLETED) -> None:
        with session_scope(self.engine) as session:
            session.execute(update(TrainJob).where(TrainJob.id == job_id).values(status=status))

    def end_inference(self, job_id: int) -> None:
        with session_scope(self.engine) as session:
            session.execute(
                update(InferenceJob).where(InferenceJob.id == job_id).values(status=InferenceJobStatus.STOPPED)
            )


@pytest.fixture
def jobs(db_url: str) -> Iterator[Jobs]:
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    with session_scope(engine) as session:
        user = User(email="dev@example.com", password_hash="-", role=UserRole.APP_DEVELOPER)
        session.add(user)
        session.flush()
        dataset = Dataset(
            owner_id=user.id,
            name="d",
            format=DatasetFormat.TABULAR,
            artifact_path="datasets/d.csv",
            size_bytes=1,
            checksum="0" * 64,
        )
        session.add(dataset)
        session.flush()
        ids = (user.id, dataset.id)
    yield Jobs(engine, *ids)
    engine.dispose()


@dataclass
class Kube:
    """The emulator (``emulator.objects`` for assertions) and a client configured for it."""

    emulator: kmock.KubernetesEmulator
    api: client.ApiClient

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def autoscaling(self) -> client.AutoscalingV2Api:
        return client.AutoscalingV2Api(self.api)


@pytest.fixture
def kube() -> Iterator[Kube]:
    """kmock's Kubernetes emulator served on 127.0.0.1 from a thread of its own (it is asyncio)."""
    ready = threading.Event()
    box: dict = {}

    async def serve() -> None:
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            # listing a kind with no object yet needs the kind declared
            emulator.resources["apps/v1/deployments"] = {}
            emulator.resources["v1/services"] = {}
            emulator.resources["autoscaling/v2/horizontalpodautoscalers"] = {}
            box.update(emulator=emulator, url=str(server.url), loop=asyncio.get_running_loop(), stop=asyncio.Event())
            ready.set()
            await box["stop"].wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="kmock", daemon=True)
    thread.start()
    assert ready.wait(10), "the Kubernetes emulator did not start"
    configuration = client.Configuration()
    configuration.host = box["url"].rstrip("/")
    api = client.ApiClient(configuration)
    try:
        yield Kube(box["emulator"], api)
    finally:
        api.close()
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
