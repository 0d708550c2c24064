"""A real admin API on loopback for the SDK and CLI tests, on SQLite and on PostgreSQL (``db_url``).

The app is served by werkzeug's threaded server in a daemon thread of the test process,
so the client talks real HTTP to it; nothing is mocked. No job driver, worker or
predictor runs: :class:`Backstage` writes what they would write (trials, their logs,
metrics and parameters, job states, the revision a predictor serves) straight to the
store, as they do.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from sqlalchemy import Engine, select, update
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from baobab import Settings
from baobab.admin import create_app
from baobab.sdk import Client
from baobab.store import (
    ArtifactStore,
    InferenceJob,
    InferenceJobStatus,
    InterimMetric,
    JobStatus,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    TrialState,
    params_to_bytes,
    record_revision_error,
    record_served_revision,
    session_scope,
    upgrade_database,
)

ROOT_EMAIL = "root@example.com"
ROOT_PASSWORD = "root-password"


@dataclass
class ApiServer:
    """Where the API answers, and the first SUPERADMIN's credentials."""

    url: str
    app: Flask
    settings: Settings
    root_email: str = ROOT_EMAIL
    root_password: str = ROOT_PASSWORD


@pytest.fixture
def api_server(db_url: str, tmp_path: Path) -> Iterator[ApiServer]:
    """The admin API of an empty, upgraded database with a known SUPERADMIN, served on 127.0.0.1."""
    upgrade_database(db_url)
    settings = Settings.from_env(
        environ={},
        home=tmp_path / "home",
        database_url=db_url,
        admin_email=ROOT_EMAIL,
        admin_password=ROOT_PASSWORD,
    )
    app = create_app(settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield ApiServer(url=f"http://127.0.0.1:{server.port}", app=app, settings=settings)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        app.extensions["baobab"].engine.dispose()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backstage:
    """Writes to the store what the job driver, the workers and the inference supervisor would."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.engine = engine
        self.artifacts = ArtifactStore(settings.artifacts_url)
        self._threads: list[threading.Thread] = []

    def add_trial(
        self,
        train_job_id: int,
        number: int,
        status: TrialState,
        score: float | None = None,
        *,
        params: dict[str, Any] | None = None,
        logs: tuple[str, ...] = (),
        metrics: tuple[dict[str, Any], ...] = (),
        error: str | None = None,
        seconds: float = 0.0,
    ) -> int:
        """A finished trial of the job's first sub-job (it ran ``seconds``), with parameters, logs and metrics
        if given; its id."""
        with session_scope(self.engine) as session:
            sub_job_id = session.scalars(select(SubJob.id).where(SubJob.train_job_id == train_job_id)).first()
            now = datetime.now(UTC)
            trial = Trial(
                sub_job_id=sub_job_id,
                number=number,
                knobs={"lr": 0.01 * (number + 1), "kind": "a"},
                policies={"EARLY_STOP": number % 2 == 1},
                status=status,
                score=score,
                started_at=now,
                finished_at=now + timedelta(seconds=seconds),
                worker="worker-1",
                attempts=1,
                error=error,
                traceback=f"Traceback (most recent call last):\n{error}" if error else None,
            )
            session.add(trial)
            session.flush()
            if params is not None:
                trial.params_path = f"params/trial-{trial.id}.safetensors"
                self.artifacts.put_bytes(trial.params_path, params_to_bytes(params))
            session.add_all(TrialLog(trial_id=trial.id, line=line) for line in logs)
            session.add_all(InterimMetric(trial_id=trial.id, step=i, metrics=m) for i, m in enumerate(metrics))
        return trial.id

    def set_train_job(self, train_job_id: int, status: JobStatus) -> None:
        with session_scope(self.engine) as session:
            session.execute(update(TrainJob).where(TrainJob.id == train_job_id).values(status=status))
            session.execute(update(SubJob).where(SubJob.train_job_id == train_job_id).values(status=status))

    def set_inference_job(
        self, job_id: int, status: InferenceJobStatus, predictor_url: str | None = None, error: str | None = None
    ) -> None:
        with session_scope(self.engine) as session:
            values = {"status": status, "predictor_url": predictor_url, "error": error}
            session.execute(update(InferenceJob).where(InferenceJob.id == job_id).values(**values))

    def serve_revision(self, job_id: int, revision: int) -> None:
        """What the predictor writes once it serves ``revision`` of the job's versions."""
        with session_scope(self.engine) as session:
            assert record_served_revision(session, job_id, revision)

    def fail_revision(self, job_id: int, revision: int, error: str) -> None:
        """What the predictor writes when it cannot load ``revision`` (it keeps serving the one before)."""
        with session_scope(self.engine) as session:
            assert record_revision_error(session, job_id, revision, error)

    def later(self, delay_s: float, action: Callable[[], None]) -> None:
        """Runs ``action`` in a thread after ``delay_s`` (as the driver would, while a client polls)."""

        def run() -> None:
            time.sleep(delay_s)
            action()

        thread = threading.Thread(target=run, daemon=True)
        self._threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)


@pytest.fixture
def backstage(api_server: ApiServer) -> Iterator[Backstage]:
    stage = Backstage(api_server.settings, api_server.app.extensions["baobab"].engine)
    yield stage
    stage.join()


TEMPLATE = """from baobab.model import BaseModel, FloatKnob


class Tiny(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(1e-4, 1e-1, is_exp=True)}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.5

    def predict(self, queries):
        return [0 for _ in queries]

    def dump_parameters(self):
        return {}

    def load_parameters(self, params):
        pass
"""


def trained_app(client: Client, backstage: Backstage, folder: Path, app: str) -> list[int]:
    """``app`` version 1 (through the API), with three COMPLETED trials of scores 0.7, 0.8, 0.9 (the workers' part,
    by ``backstage``); their ids."""
    (folder / "small.py").write_text(TEMPLATE)
    (folder / "small.csv").write_text("x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n")
    model = client.create_model(folder / "small.py", task="TABULAR_CLASSIFICATION", class_name="Tiny")
    data = client.create_dataset("small", folder / "small.csv", format="TABULAR")
    job = client.create_train_job(
        app,
        "TABULAR_CLASSIFICATION",
        train_dataset_id=data["id"],
        val_dataset_id=data["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 3, "GPU_COUNT": 0},
        target="label",
    )
    params = {"w": np.zeros(2, dtype=np.float32)}
    return [backstage.add_trial(job["id"], n, "COMPLETED", 0.7 + n / 10, params=params) for n in range(3)]


OddServer = Callable[[Callable[[Request], Response]], str]


@pytest.fixture
def odd_server() -> Iterator[OddServer]:
    """Serves a plain request handler on loopback (a server that is not Baobab's API, or a broken one)."""
    servers: list[Any] = []

    def serve(handler: Callable[[Request], Response]) -> str:
        server = make_server("127.0.0.1", 0, Request.application(handler), threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()
