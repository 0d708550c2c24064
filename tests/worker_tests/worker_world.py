"""Helpers of the worker tests: a platform's rows (a user, two datasets, template rows, jobs, trials).

Everything is real: the database at ``db_url`` (SQLite and PostgreSQL) upgraded to the
head revision, dataset and template artifacts in an artifact store, ORM rows that point
at them. Templates are the files in ``templates/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from baobab import Settings
from baobab.advisor import JobDriver
from baobab.model import Task, check_template, knob_config_to_json, load_template
from baobab.store import (
    ArtifactStore,
    Dataset,
    InterimMetric,
    LocalEventChannel,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    TrialState,
    session_scope,
)
from baobab.worker import LocalExecutor

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Platform:
    """The rows and stores of one test; :meth:`add_trial` makes PENDING trials of the probe template."""

    settings: Settings
    engine: Engine
    artifacts: ArtifactStore
    signal_dir: Path
    owner_id: int = 0
    api_url: str = ""
    datasets: tuple[int, int] = (0, 0)
    _templates: dict[tuple[str, str], int] = field(default_factory=dict)
    _sub_jobs: dict[tuple[str, str], int] = field(default_factory=dict)
    _numbers: dict[int, int] = field(default_factory=dict)

    def template(self, file: str = "probe.py", class_name: str | None = None) -> int:
        """The id of a ModelTemplate row for class ``class_name`` of ``templates/<file>`` (stored once); by
        default the class named after the file."""
        class_name = class_name or Path(file).stem.title().replace("_", "")
        if (file, class_name) in self._templates:
            return self._templates[file, class_name]
        source = (TEMPLATES / file).read_bytes()
        checksum = hashlib.sha256(source).hexdigest()
        key = f"templates/{checksum}.py"
        self.artifacts.put_bytes(key, source)
        try:
            config = knob_config_to_json(check_template(load_template(TEMPLATES / file, class_name)))
        except Exception:
            config = "{}"  # a broken template: the worker finds out
        with session_scope(self.engine) as session:
            row = ModelTemplate(
                owner_id=self.owner_id,
                name=file,
                task=Task.TABULAR_CLASSIFICATION,
                class_name=class_name,
                artifact_path=key,
                checksum=checksum,
                access=ModelAccess.PRIVATE,
                knob_config=config,
            )
            session.add(row)
            session.flush()
            self._templates[file, class_name] = row.id
        return self._templates[file, class_name]

    def sub_job(
        self, file: str = "probe.py", train_args: dict[str, Any] | None = None, options: dict[str, Any] | None = None
    ) -> int:
        """A sub-job of the template ``file`` in a train job with ``train_args`` and ``options`` (one per three), whose
        datasets' target column is ``y`` (the job's ``target``)."""
        train_args = {"signal_dir": str(self.signal_dir), **(train_args or {})}
        key = (file, repr(sorted(train_args.items())) + repr(options))
        if key not in self._sub_jobs:
            template_id = self.template(file)
            with session_scope(self.engine) as session:
                job = TrainJob(
                    owner_id=self.owner_id,
                    app=f"app-{uuid.uuid4().hex[:8]}",
                    app_version=1,
                    task=Task.TABULAR_CLASSIFICATION,
                    train_dataset_id=self.datasets[0],
                    val_dataset_id=self.datasets[1],
                    budget={"MODEL_TRIAL_COUNT": 100},
                    train_args=train_args,
                    target="y",
                    options=options or {},
                )
                session.add(job)
                session.flush()
                sub_job = SubJob(train_job_id=job.id, model_template_id=template_id, strategy="random", seed=1234)
                session.add(sub_job)
                session.flush()
                self._sub_jobs[key] = sub_job.id
        return self._sub_jobs[key]

    def add_trial(
        self,
        mode: str = "ok",
        x: float = 0.5,
        *,
        file: str = "probe.py",
        train_args: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> int:
        """A PENDING trial (knobs mode, x, quick=False) of a job with ``options``; returns its id."""
        sub_job_id = self.sub_job(file, train_args, options)
        number = self._numbers.get(sub_job_id, 0)
        self._numbers[sub_job_id] = number + 1
        with session_scope(self.engine) as session:
            trial = Trial(
                sub_job_id=sub_job_id,
                number=number,
                knobs={"mode": mode, "x": x, "quick": False},
                policies={"EARLY_STOP": False},
            )
            session.add(trial)
            session.flush()
            return trial.id

    def trial(self, trial_id: int) -> Trial:
        with session_scope(self.engine) as session:
            return session.get_one(Trial, trial_id)

    def logs(self, trial_id: int) -> list[str]:
        with session_scope(self.engine) as session:
            return list(
                session.scalars(select(TrialLog.line).where(TrialLog.trial_id == trial_id).order_by(TrialLog.id))
            )

    def metrics(self, trial_id: int) -> list[tuple[int, dict[str, Any]]]:
        query = select(InterimMetric.step, InterimMetric.metrics).where(InterimMetric.trial_id == trial_id)
        with session_scope(self.engine) as session:
            return [(step, metrics) for step, metrics in session.execute(query.order_by(InterimMetric.id))]

    def probe_line(self, trial_id: int) -> dict[str, str]:
        """What the probe template printed about its process: pid, imports, data, seed, draw."""
        (line,) = [line for line in self.logs(trial_id) if line.startswith("probe ")]
        return dict(part.split("=", 1) for part in line.split()[1:])

    def dataset_key(self, index: int) -> str:
        """The artifact key of the training (0) or validation (1) dataset."""
        with session_scope(self.engine) as session:
            return session.get_one(Dataset, self.datasets[index]).artifact_path

    def set_status(self, trial_id: int, status: TrialState) -> None:
        with session_scope(self.engine) as session:
            session.get_one(Trial, trial_id).status = status


def tabular_frame(rows: int, seed: int) -> pd.DataFrame:
    """A small TABULAR dataset: features a, b; target y = (a > 0)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=rows)
    return pd.DataFrame({"a": a, "b": rng.normal(size=rows), "y": (a > 0).astype(int)})


@contextmanager
def driving(platform: Platform, events: LocalEventChannel, *, workers: int = 1, **options: Any) -> Iterator[JobDriver]:
    """A real job driver in a thread, on ``workers`` worker processes, which are the CPU slots of a job
    (by default one: trials one after the other, each proposal sees every earlier outcome);
    ``options`` go to the driver."""
    settings = dataclasses.replace(platform.settings, cpu_slots=workers)
    with LocalExecutor(settings, events, api_url=platform.api_url, workers=workers) as executor:
        driver = JobDriver(platform.engine, executor, events, settings, stop_check_s=0.05, **options)
        stop = threading.Event()
        thread = threading.Thread(target=driver.run, args=(stop,), daemon=True)
        thread.start()
        try:
            yield driver
        finally:
            stop.set()
            thread.join(10)
    assert not thread.is_alive()
