"""Rows for the train-job and trial endpoint tests: datasets through the API, templates and trials through the ORM.

Templates are inserted directly (the models endpoint is not what these tests are about);
trials, their logs and metrics too, since only the job driver and the workers write them.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import Engine

from baobab.model import FloatKnob, IntegerKnob, PolicyKnob, Task, knob_config_to_json
from baobab.store import ModelAccess, ModelTemplate, Trial, TrialState, session_scope

__all__ = ["CSV", "ENAS_KNOB_CONFIG", "T0", "add_model", "add_trial", "job_body", "upload_dataset"]

Headers = dict[str, str]

CSV = b"x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n"
KNOB_CONFIG = knob_config_to_json(
    {"lr": FloatKnob(1e-4, 1e-1, is_exp=True), "layers": IntegerKnob(1, 4), "early": PolicyKnob("EARLY_STOP")}
)
#: A template an ENAS search can run: it declares the policies the search sets.
ENAS_KNOB_CONFIG = knob_config_to_json(
    {"lr": FloatKnob(1e-4, 1e-1, is_exp=True), "share": PolicyKnob("SHARE_PARAMS"), "skip": PolicyKnob("SKIP_TRAIN")}
)
#: A fixed time, so that tests can give trials a known order of creation.
T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def upload_dataset(client: FlaskClient, headers: Headers, *, data: bytes = CSV, data_format: str = "TABULAR") -> int:
    """Uploads a dataset through ``POST /api/v1/datasets``; its id."""
    name = "data.zip" if data_format == "IMAGE_FILES" else "data.csv"
    response = client.post(
        "/api/v1/datasets",
        data={"name": f"{data_format} set", "format": data_format, "file": (io.BytesIO(data), name)},
        headers=headers,
        content_type="multipart/form-data",
    )
    assert response.status_code == 201, response.json
    return int(response.json["id"])


def add_model(
    engine: Engine,
    owner_id: int,
    *,
    task: Task = Task.TABULAR_CLASSIFICATION,
    access: ModelAccess = ModelAccess.PRIVATE,
    name: str = "model",
    knob_config: str = KNOB_CONFIG,
) -> int:
    """Inserts a model template row (no file behind it); its id."""
    model = ModelTemplate(
        owner_id=owner_id,
        name=name,
        task=task,
        class_name="Model",
        artifact_path=f"models/{name}.py",
        checksum="0" * 64,
        access=access,
        knob_config=knob_config,
    )
    with session_scope(engine) as session:
        session.add(model)
    return model.id


def add_trial(
    engine: Engine,
    sub_job_id: int,
    number: int,
    status: TrialState = TrialState.COMPLETED,
    score: float | None = None,
    **columns: Any,
) -> int:
    """Inserts a trial row (created ``number`` seconds after :data:`T0` unless given); its id."""
    columns.setdefault("created_at", T0 + timedelta(seconds=number))
    trial = Trial(
        sub_job_id=sub_job_id,
        number=number,
        knobs={"lr": 0.01, "layers": number % 4 + 1, "early": False},
        policies={"EARLY_STOP": False},
        status=status,
        score=score,
        **columns,
    )
    with session_scope(engine) as session:
        session.add(trial)
    return trial.id


def job_body(train: int, val: int, models: list[int], /, **overrides: Any) -> dict[str, Any]:
    """A valid ``POST /api/v1/train_jobs`` body for a TABULAR_CLASSIFICATION job; ``overrides`` replace fields."""
    body: dict[str, Any] = {
        "app": "fraud",
        "task": "TABULAR_CLASSIFICATION",
        "train_dataset_id": train,
        "val_dataset_id": val,
        "model_ids": models,
        "budget": {"MODEL_TRIAL_COUNT": 5},
    }
    body.update(overrides)
    return body
