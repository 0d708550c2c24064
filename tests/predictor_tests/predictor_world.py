"""Helpers for the predictor's tests: a store with real trained trials, and predictors to talk to.

:class:`World` writes what the admin API and the workers would have written: a user,
datasets and templates in the artifact store, a finished train job whose trials were
trained here (in this process, with the real templates) and whose parameters went
through ``params_to_bytes``, and inference jobs over them.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import requests
from sqlalchemy import Engine

from baobab import Settings
from baobab.model import BaseModel, DatasetFormat, Task, knob_config_to_json, knobs_to_json, load_template
from baobab.predictor import InferenceSupervisor, PredictorOptions
from baobab.predictor._supervisor import _predictor_env
from baobab.store import (
    ArtifactStore,
    Dataset,
    InferenceJob,
    InferenceJobStatus,
    JobStatus,
    LocalEventChannel,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    User,
    UserRole,
    create_engine_from_url,
    first_inference_revision,
    params_to_bytes,
    session_scope,
    upgrade_database,
    write_tabular,
)
from baobab.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "templates" / "predictor_tiny.py"
ITEM_NET = Path(__file__).resolve().parent / "templates" / "predictor_torch.py"
SK_TABULAR = ROOT / "examples" / "models" / "sklearn_tabular.py"
SK_IMAGES = ROOT / "examples" / "models" / "sklearn_images.py"
TORCH_CNN = ROOT / "examples" / "models" / "torch_cnn.py"
# Generous on a busy machine; a predictor normally starts in a few seconds.
START_TIMEOUT_S = 60.0
#: The first SUPERADMIN of the admin API the ``platform`` fixture serves.
ROOT_LOGIN = ("root@example.com", "root-password")


def tabular_frame(name: str) -> pd.DataFrame:
    """One of scikit-learn's bundled tabular sets, features then ``target``."""
    from sklearn import datasets

    loader = {"breast_cancer": datasets.load_breast_cancer, "diabetes": datasets.load_diabetes}[name]
    bunch = loader(as_frame=True)
    frame = bunch.frame.copy()
    frame.columns = [str(c).replace(" ", "_") for c in frame.columns]
    return frame


@dataclass
class Trained:
    """A trial trained in the test process, with the model to compare the predictor with."""

    trial_id: int
    model: BaseModel


@dataclass
class World:
    settings: Settings
    engine: Engine
    store: ArtifactStore
    owner_id: int
    work: Path
    _numbers: dict[int, int] = field(default_factory=dict)

    def dataset(self, path: Path, fmt: DatasetFormat) -> tuple[int, Path]:
        data = path.read_bytes()
        with session_scope(self.engine) as session:
            row = Dataset(
                owner_id=self.owner_id,
                name=path.name,
                format=fmt,
                artifact_path="pending",
                size_bytes=len(data),
                checksum=hashlib.sha256(data).hexdigest(),
            )
            session.add(row)
            session.flush()
            row.artifact_path = f"datasets/{row.id}/{path.name}"
            self.store.put_bytes(row.artifact_path, data)
            return row.id, path

    def tabular(self, name: str) -> tuple[int, Path]:
        path = write_tabular(self.work / f"{name}.csv", tabular_frame(name))
        return self.dataset(path, DatasetFormat.TABULAR)

    def train_job(
        self,
        task: Task,
        dataset_id: int,
        template: Path,
        class_name: str,
        *,
        app: str | None = None,
        version: int = 1,
        target: str | None = None,
    ) -> int:
        """A COMPLETED train job (of a new app unless ``app``, naming the ``target`` column of its dataset) with one
        sub-job on ``template``; the sub-job's id."""
        data = template.read_bytes()
        checksum = hashlib.sha256(data).hexdigest()
        key = f"templates/{checksum}.py"
        self.store.put_bytes(key, data)
        cls = load_template(template, class_name)
        with session_scope(self.engine) as session:
            model = ModelTemplate(
                owner_id=self.owner_id,
                name=class_name,
                task=task,
                class_name=class_name,
                artifact_path=key,
                checksum=checksum,
                access=ModelAccess.PUBLIC,
                knob_config=knob_config_to_json(cls.get_knob_config()),
            )
            job = TrainJob(
                owner_id=self.owner_id,
                app=app or f"app-{secrets.token_hex(4)}",
                app_version=version,
                task=task,
                train_dataset_id=dataset_id,
                val_dataset_id=dataset_id,
                budget={"MODEL_TRIAL_COUNT": 3},
                target=target,
                status=JobStatus.COMPLETED,
            )
            session.add_all([model, job])
            session.flush()
            sub_job = SubJob(
                train_job_id=job.id, model_template_id=model.id, strategy="random", seed=1, status=JobStatus.COMPLETED
            )
            session.add(sub_job)
            session.flush()
            return sub_job.id

    def trial(
        self,
        sub_job_id: int,
        template: Path,
        class_name: str,
        knobs: dict[str, Any],
        dataset: Path,
        *,
        score: float,
        train_args: dict[str, Any] | None = None,
        store_params: bool = True,
    ) -> Trained:
        """Train a real model, store its parameters and a COMPLETED trial row."""
        model = load_template(template, class_name)(**knobs)
        model.train(str(dataset), **(train_args or {}))
        number = self._numbers.get(sub_job_id, 0)
        self._numbers[sub_job_id] = number + 1
        with session_scope(self.engine) as session:
            trial = Trial(
                sub_job_id=sub_job_id,
                number=number,
                knobs=json.loads(knobs_to_json(knobs)),
                status=TrialState.COMPLETED,
                score=score,
            )
            session.add(trial)
            session.flush()
            if store_params:
                trial.params_path = f"params/trial-{trial.id}.safetensors"
                self.store.put_bytes(trial.params_path, params_to_bytes(model.dump_parameters()))
            return Trained(trial.id, model)

    def inference_job(
        self,
        trial_ids: list[int],
        *,
        public: bool = False,
        status: InferenceJobStatus = InferenceJobStatus.STARTING,
        predictor_url: str | None = None,
        **fields: Any,
    ) -> tuple[int, str]:
        """An inference job serving ``trial_ids`` as version "v1", more columns in ``fields``; returns id and key."""
        api_key = secrets.token_urlsafe(32)
        with session_scope(self.engine) as session:
            train_job_id = session.get(SubJob, session.get(Trial, trial_ids[0]).sub_job_id).train_job_id
            job = InferenceJob(
                owner_id=self.owner_id,
                train_job_id=train_job_id,
                status=status,
                api_key_hash=hashlib.sha256(api_key.encode()).hexdigest(),
                public=public,
                predictor_url=predictor_url,
                **fields,
            )
            session.add(job)
            session.flush()
            first_inference_revision(session, job, trial_ids)
            return job.id, api_key

    def job(self, job_id: int) -> InferenceJob:
        with session_scope(self.engine) as session:
            return session.get(InferenceJob, job_id)


@dataclass
class TwoUsers:
    """An admin; Ann, who owns a trained TinyRegressor trial of app ``app``; Bob, who owns nothing; each logged in."""

    root: Any
    ann: Any
    bob: Any
    app: str
    trial: Trained


def two_users_and_a_trial(world: World, url: str) -> TwoUsers:
    """Make Ann and Bob (APP_DEVELOPERs) through the API at ``url``, and a trained trial of Ann's in ``world``."""
    from baobab.sdk import Client  # the SDK only where a test talks to the API

    root = Client(url)
    root.login(*ROOT_LOGIN)
    for name in ("ann", "bob"):
        root.create_user(f"{name}@example.com", f"{name}-password", role="APP_DEVELOPER")
    ann, bob = Client(url), Client(url)
    ann.login("ann@example.com", "ann-password")
    bob.login("bob@example.com", "bob-password")
    world.owner_id = next(u["id"] for u in root.list_users() if u["email"] == "ann@example.com")
    dataset_id, diabetes = world.tabular("diabetes")
    sub_job = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor")
    trial = world.trial(sub_job, TINY, "TinyRegressor", {"offset": 1.0}, diabetes, score=0.5)
    with session_scope(world.engine) as session:
        app = session.get(TrainJob, session.get(SubJob, sub_job).train_job_id).app
    return TwoUsers(root, ann, bob, app, trial)


def make_world(db_url: str, home: Path, **settings_given: Any) -> World:
    """A world on ``db_url`` and ``home``, with more settings (predictors get them too) in ``settings_given``."""
    upgrade_database(db_url)
    settings = Settings.from_env(environ={}, home=home, database_url=db_url, **settings_given)
    engine = create_engine_from_url(db_url)
    with session_scope(engine) as session:
        user = User(email="dev@example.com", password_hash="x", role=UserRole.APP_DEVELOPER)
        session.add(user)
        session.flush()
        owner_id = user.id
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    return World(settings, engine, ArtifactStore(settings.artifacts_url), owner_id, work)


class Predictor:
    """A ``python -m baobab.predictor`` process started by a test."""

    def __init__(self, world: World, job_id: int, *options: str) -> None:
        self.log_path = world.work / f"predictor-{job_id}.log"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "baobab.predictor", str(job_id), "--exit-with-parent", *options],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=_predictor_env(world.settings),
                start_new_session=True,
            )
        self.url: str | None = None

    def wait_url(self, timeout: float = START_TIMEOUT_S) -> str:
        assert self.process.stdout is not None
        found: list[bytes] = []
        reader = threading.Thread(target=lambda: found.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        assert found and found[0], f"no URL line; the predictor's log:\n{self.log_path.read_text()}"
        self.url = json.loads(found[0])["url"]
        return self.url

    def close(self) -> None:
        if self.process.returncode is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            assert stream is not None
            stream.close()


def wait_ready(url: str, members: int, timeout: float = 30.0) -> None:
    """Wait until all ``members`` of the predictor at ``url`` are up (after a restart)."""
    wait_until(
        lambda: requests.get(f"{url}/health", timeout=5).json()["ready"] == members, timeout=timeout, what="members up"
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent to reap it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return False


def command_line(pid: int) -> list[str]:
    """The arguments process ``pid`` was started with."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a predictor's inference workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def supervise(
    world: World, events: LocalEventChannel, job_ids: set[int], **options: Any
) -> tuple[InferenceSupervisor, Callable[[], None]]:
    """An inference supervisor of ``job_ids`` (with :class:`PredictorOptions` ``options``) in a thread, and what
    stops it."""
    supervisor = InferenceSupervisor(
        world.engine, events, world.settings, job_ids=job_ids, options=PredictorOptions(**options), reconcile_s=0.3
    )
    return supervisor, run_in_thread(supervisor)


def run_in_thread(supervisor: InferenceSupervisor) -> Callable[[], None]:
    """Run ``supervisor`` in a thread; what stops it (and checks that it stopped)."""
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()

    return halt
