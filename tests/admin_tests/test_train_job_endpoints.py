"""``/api/v1/train_jobs``: creation with every field checked, versions per app, visibility, stop, trial listings."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event, func, select
from train_job_world import ENAS_KNOB_CONFIG, T0, add_model, add_trial, job_body, upload_dataset

from baobab import Settings
from baobab.admin import create_app
from baobab.admin._train_job_spec import DEPRECATION
from baobab.advisor import TrainJobOptions
from baobab.model import Task
from baobab.store import (
    Event,
    EventKind,
    JobStatus,
    LocalEventChannel,
    ModelAccess,
    SubJob,
    TrainJob,
    TrialState,
    UserRole,
    ZooModel,
    session_scope,
    sub_job_seed,
    write_image_files,
)

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
STATES = [state.value for state in TrialState]
DROP = object()  # a field to leave out of the body
#: A job's options when the request sets none: every one at its default.
DEFAULT_OPTIONS = TrainJobOptions().to_json()


@dataclass
class World:
    """Alice (APP_DEVELOPER) and Bob (MODEL_DEVELOPER) with their datasets and templates, and an ADMIN."""

    alice: Headers
    alice_id: int
    bob: Headers
    bob_id: int
    admin: Headers
    a_train: int
    a_val: int
    a_images: int
    b_data: int
    a_private: int
    a_images_model: int
    a_regression: int
    b_public: int
    b_private: int


@pytest.fixture
def world(app: Flask, client: FlaskClient, add_user: AddUser, tmp_path: Path) -> World:
    engine = app.extensions["baobab"].engine
    alice_user, alice = add_user(UserRole.APP_DEVELOPER)
    bob_user, bob = add_user(UserRole.MODEL_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)
    images = np.zeros((4, 3, 3), dtype=np.uint8)
    zip_bytes = write_image_files(tmp_path / "tiny.zip", images, [0, 1, 0, 1]).read_bytes()
    a, b = alice_user["id"], bob_user["id"]
    return World(
        alice=alice,
        alice_id=a,
        bob=bob,
        bob_id=b,
        admin=admin,
        a_train=upload_dataset(client, alice),
        a_val=upload_dataset(client, alice),
        a_images=upload_dataset(client, alice, data=zip_bytes, data_format="IMAGE_FILES"),
        b_data=upload_dataset(client, bob),
        a_private=add_model(engine, a, name="a-private"),
        a_images_model=add_model(engine, a, task=Task.IMAGE_CLASSIFICATION, name="a-images"),
        a_regression=add_model(engine, a, task=Task.TABULAR_REGRESSION, name="a-regression"),
        b_public=add_model(engine, b, access=ModelAccess.PUBLIC, name="b-public"),
        b_private=add_model(engine, b, name="b-private"),
    )


def _body(w: World, **overrides: Any) -> dict[str, Any]:
    body = job_body(w.a_train, w.a_val, [w.a_private, w.b_public], **overrides)
    return {k: v for k, v in body.items() if v is not DROP}


def test_create_get_and_list(app: Flask, client: FlaskClient, world: World) -> None:
    w = world
    events = app.extensions["baobab"].events.subscribe(EventKind.JOB_CREATED, EventKind.JOB_STOPPED)
    body = _body(w, strategy="tpe", target="label", train_args={"epochs": 2}, budget={"MODEL_TRIAL_COUNT": 5})
    created = client.post("/api/v1/train_jobs", json=body, headers=w.alice)
    assert created.status_code == 201, created.json
    job = created.json
    assert events.get(timeout=5) == Event(EventKind.JOB_CREATED, job["id"])
    assert job.pop("created_at")
    assert 0 <= job.pop("seed") < 2**63  # none given: a random one, kept
    sub_ids = [sub["id"] for sub in job["sub_jobs"]]
    zero = dict.fromkeys(STATES, 0)
    assert job == {
        "id": job["id"], "app": "fraud", "app_version": 1, "task": "TABULAR_CLASSIFICATION", "status": "PENDING",
        "error": None, "train_dataset_id": w.a_train, "val_dataset_id": w.a_val,
        "budget": {"GPU_COUNT": 0, "MODEL_TRIAL_COUNT": 5}, "train_args": {"epochs": 2}, "target": "label",
        "owner_id": w.alice_id, "started_at": None, "finished_at": None, "trial_counts": zero, "best_score": None,
        "budget_used": {"time_s": 0.0, "time_limit_s": None, "trials": 0, "trial_limit": 10}, "placement": None,
        "fusion_profiling": None, "determinism": None, "gpu_share": None,
        "options": DEFAULT_OPTIONS,
        "sub_jobs": [
            {"id": sub_ids[0], "model_id": w.a_private, "model_name": "a-private", "strategy": "tpe",
             "status": "PENDING", "error": None, "trial_counts": zero},
            {"id": sub_ids[1], "model_id": w.b_public, "model_name": "b-public", "strategy": "tpe",
             "status": "PENDING", "error": None, "trial_counts": zero},
        ],
    }  # fmt: skip
    with session_scope(app.extensions["baobab"].engine) as session:
        seeds = session.scalars(select(SubJob.seed).where(SubJob.train_job_id == job["id"])).all()
    assert len(set(seeds)) == 2 and all(0 <= seed < 2**63 for seed in seeds)

    # Defaults, and versions counted per app of each owner.
    second = client.post("/api/v1/train_jobs", json=_body(w, budget={"TIME_HOURS": 1}), headers=w.alice).json
    assert (second["app_version"], second["train_args"], second["budget"]) == (
        2,
        {},
        {"GPU_COUNT": 0, "TIME_HOURS": 1.0},
    )
    assert [sub["strategy"] for sub in second["sub_jobs"]] == ["auto", "auto"]
    bobs = _body(w, train_dataset_id=w.b_data, val_dataset_id=w.b_data, model_ids=[w.b_private, w.b_public])
    third = client.post("/api/v1/train_jobs", json=bobs, headers=w.bob)
    assert (third.status_code, third.json["app_version"]) == (201, 1), third.json
    other = client.post("/api/v1/train_jobs", json=_body(w, app="Other_app-2.0"), headers=w.alice).json
    assert other["app_version"] == 1
    assert [events.get(timeout=5) for _ in range(3)] == [
        Event(EventKind.JOB_CREATED, j["id"]) for j in (second, third.json, other)
    ]
    # Admins may train on anyone's datasets and private templates.
    as_admin = _body(w, app="admins", model_ids=[w.b_private, w.a_private])
    assert client.post("/api/v1/train_jobs", json=as_admin, headers=w.admin).status_code == 201

    # The latest version is the latest of the caller's own app.
    def version(path: str, headers: Headers) -> int:
        response = client.get(path, headers=headers)
        assert response.status_code == 200, response.json
        return int(response.json["app_version"])

    assert version("/api/v1/train_jobs/fraud", w.alice) == 2
    assert version("/api/v1/train_jobs/fraud", w.bob) == 1
    assert version(f"/api/v1/train_jobs/fraud?owner_id={w.alice_id}", w.admin) == 2
    assert client.get("/api/v1/train_jobs/fraud/1", headers=w.alice).json == created.json
    for path, message in [
        ("/api/v1/train_jobs/fraud/9", "no train job 'fraud' version 9"),
        ("/api/v1/train_jobs/fraud/0", "no train job 'fraud' version 0"),
        ("/api/v1/train_jobs/fraud/99999999999999999999999", "no train job 'fraud' version 99999999999999999999999"),
        ("/api/v1/train_jobs/nope", "no train job for app 'nope'"),
    ]:
        response = client.get(path, headers=w.alice)
        assert (response.status_code, response.json["error"]["message"]) == (404, message)

    def listed(query: str, headers: Headers) -> list[tuple[str, int]]:
        response = client.get(f"/api/v1/train_jobs{query}", headers=headers)
        assert response.status_code == 200, response.json
        return [(j["app"], j["app_version"]) for j in response.json["train_jobs"]]

    assert listed("", w.alice) == [("Other_app-2.0", 1), ("fraud", 2), ("fraud", 1)]  # newest first
    assert listed("?app=fraud", w.alice) == [("fraud", 2), ("fraud", 1)]
    assert listed("?app=nope", w.alice) == []
    assert listed("?app=fraud", w.admin) == [("fraud", 1), ("fraud", 2), ("fraud", 1)]
    assert len(listed("", w.admin)) == 5
    assert client.get("/api/v1/train_jobs?include=train_args", headers=w.alice).json["train_jobs"][2] == created.json
    bad = client.get("/api/v1/train_jobs?ap=fraud", headers=w.alice)
    assert (bad.status_code, bad.json["error"]["field"]) == (400, "ap")
    assert client.get("/api/v1/train_jobs").status_code == 401
    assert client.post("/api/v1/train_jobs", json=_body(w)).status_code == 401
    assert events.get(timeout=0) == Event(EventKind.JOB_CREATED, 5)  # the admin's; nothing else
    assert events.get(timeout=0) is None


def test_every_bad_field_is_refused_by_name(app: Flask, client: FlaskClient, world: World) -> None:
    w = world
    events = app.extensions["baobab"].events.subscribe()
    no_dataset = "no dataset {}: give the id of one of your datasets"
    no_model = "no model {}: give the id of your own or a PUBLIC model template"
    cases: list[tuple[dict[str, Any], str | None, str]] = [
        ({"colour": "red"}, "colour", "unknown field 'colour'; known fields: app, task, train_dataset_id"),
        ({"app": DROP}, "app", "'app' is required"),
        ({"app": 5}, "app", "'app' must be a string, got a number"),
        ({"app": " "}, "app", "'app' must not be blank"),
        ({"app": "my app"}, "app", "use 1 to 64 letters, digits, '_', '.' or '-'"),
        ({"app": "a/b"}, "app", "use 1 to 64 letters"),
        ({"app": "x" * 65}, "app", "'app' has 65 characters, at most 64 are allowed"),
        ({"task": DROP}, "task", "'task' is required"),
        ({"task": "VIDEO"}, "task", "expected one of IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION, TABULAR_REGRESSION"),
        ({"train_dataset_id": DROP}, "train_dataset_id", "'train_dataset_id' is required"),
        ({"train_dataset_id": "1"}, "train_dataset_id", "'train_dataset_id' must be an integer, got '1'"),
        ({"train_dataset_id": True}, "train_dataset_id", "must be an integer, got True"),
        ({"train_dataset_id": 1.5}, "train_dataset_id", "must be an integer, got 1.5"),
        ({"train_dataset_id": 999_999}, "train_dataset_id", no_dataset.format(999_999)),
        ({"train_dataset_id": 0}, "train_dataset_id", no_dataset.format(0)),
        ({"train_dataset_id": 2**70}, "train_dataset_id", no_dataset.format(2**70)),
        # Someone else's dataset reads exactly like a missing one.
        ({"train_dataset_id": w.b_data}, "train_dataset_id", no_dataset.format(w.b_data)),
        ({"train_dataset_id": w.a_images}, "train_dataset_id",
         f"dataset {w.a_images} ('IMAGE_FILES set') is IMAGE_FILES; a TABULAR_CLASSIFICATION job needs TABULAR"),
        ({"val_dataset_id": DROP}, "val_dataset_id", "'val_dataset_id' is required"),
        ({"val_dataset_id": w.b_data}, "val_dataset_id", no_dataset.format(w.b_data)),
        ({"val_dataset_id": w.a_images}, "val_dataset_id", "is IMAGE_FILES; a TABULAR_CLASSIFICATION job needs"),
        ({"task": "IMAGE_CLASSIFICATION", "model_ids": [w.a_images_model]}, "train_dataset_id",
         "is TABULAR; a IMAGE_CLASSIFICATION job needs IMAGE_FILES datasets"),
        ({"model_ids": DROP}, "model_ids", "'model_ids' is required"),
        ({"model_ids": w.a_private}, "model_ids", "'model_ids' must be an array, got a number"),
        ({"model_ids": []}, "model_ids", "'model_ids' has 0 items; it needs at least 1"),
        ({"model_ids": list(range(1, 102))}, "model_ids", "'model_ids' has 101 items; at most 100 are allowed"),
        ({"model_ids": [w.a_private, "2"]}, "model_ids[1]", "'model_ids[1]' must be an integer, got '2'"),
        ({"model_ids": [w.a_private, None]}, "model_ids[1]", "must be an integer, got None"),
        ({"model_ids": [w.a_private, w.b_public, w.a_private]}, "model_ids[2]",
         f"model {w.a_private} is listed twice (model_ids[0] and model_ids[2])"),
        ({"model_ids": [w.a_private, 999_999]}, "model_ids[1]", no_model.format(999_999)),
        ({"model_ids": [2**70]}, "model_ids[0]", no_model.format(2**70)),
        ({"model_ids": [w.b_private]}, "model_ids[0]", no_model.format(w.b_private)),
        ({"model_ids": [w.a_private, w.a_images_model]}, "model_ids[1]",
         f"model {w.a_images_model} ('a-images') is for IMAGE_CLASSIFICATION, not TABULAR_CLASSIFICATION"),
        ({"model_ids": [w.a_regression]}, "model_ids[0]", "is for TABULAR_REGRESSION, not TABULAR_CLASSIFICATION"),
        ({"budget": DROP}, "budget", "'budget' is required"),
        ({"budget": None}, "budget", "'budget' is required"),
        ({"budget": [1]}, "budget", "a budget must be an object"),
        ({"budget": {}}, "budget", "the budget is empty"),
        ({"budget": {"GPU_COUNT": 1}}, "budget", "give TIME_HOURS or MODEL_TRIAL_COUNT"),
        ({"budget": {"GPUS": 1, "TIME_HOURS": 1}}, "budget.GPUS", "budget.GPUS: unknown budget key 'GPUS'"),
        ({"budget": {"TIME_HOURS": 0}}, "budget.TIME_HOURS", "budget.TIME_HOURS: must be above 0"),
        ({"budget": {"TIME_HOURS": "1"}}, "budget.TIME_HOURS", "must be a number of hours, got '1'"),
        ({"budget": {"TIME_HOURS": 1e9}}, "budget.TIME_HOURS", "at most 8760"),
        ({"budget": {"TIME_HOURS": 1e-300}}, "budget.TIME_HOURS", "must be at least one minute"),
        ({"budget": {"TIME_HOURS": 1, "GPU_COUNT": -1}}, "budget.GPU_COUNT", "must be between 0 and 1024"),
        ({"budget": {"TIME_HOURS": 1, "GPU_COUNT": 1.0}}, "budget.GPU_COUNT", "must be an integer"),
        ({"budget": {"MODEL_TRIAL_COUNT": 0}}, "budget.MODEL_TRIAL_COUNT", "must be between 1 and 100000"),
        ({"budget": {"MODEL_TRIAL_COUNT": True}}, "budget.MODEL_TRIAL_COUNT", "must be an integer"),
        ({"train_args": ["target"]}, "train_args", "'train_args' must be an object"),
        ({"train_args": {"seed": 1}}, "train_args.seed", "train_args may not set 'seed'"),
        ({"train_args": {"shared_params": {}}}, "train_args.shared_params", "may not set 'shared_params'"),
        ({"target": 3}, "target", "'target' must be a string, got a number"),
        ({"target": ["label"]}, "target", "'target' must be a string"),
        ({"target": " "}, "target", "'target' must not be blank"),
        ({"target": "la\nbel"}, "target", "'target' holds the control character '\\n'"),
        ({"target": "x" * 256}, "target", "'target' has 256 characters, at most 255 are allowed"),
        # Counted as sent: the CSV's header must match it character for character, so it is not normalised.
        ({"target": "e\u0301" * 128}, "target", "'target' has 256 characters, at most 255 are allowed"),
        # An image job's datasets have no target column: refused before its datasets are looked at.
        ({"task": "IMAGE_CLASSIFICATION", "target": "label"}, "target",
         "'target' is for TABULAR_CLASSIFICATION and TABULAR_REGRESSION jobs, whose datasets have a target column; "
         "a IMAGE_CLASSIFICATION job has none"),
        ({"options": ["fusion"]}, "options", "'options' must be an object"),
        ({"options": {"epochs": 2}}, "options.epochs", "unknown key 'epochs'; known keys: early_stopping, policies"),
        ({"options": {"enas": [2]}}, "options.enas", "options.enas: must be an object, got [2]"),
        ({"options": {"enas": {"epochs": 2}}}, "options.enas.epochs", "unknown key 'epochs'"),
        ({"options": {"enas": {"train_trials": 0}}}, "options.enas.train_trials", "must be a whole number >= 1"),
        ({"options": {"enas": {"evaluate_trials": -1}}}, "options.enas.evaluate_trials", "whole number >= 1"),
        ({"options": {"enas": {"top_k": 1.5}}}, "options.enas.top_k", "must be a whole number, got 1.5"),
        ({"options": {"enas": {"warmup_fraction": 1.0}}}, "options.enas.warmup_fraction", "in [0, 1)"),
        ({"options": {"early_stopping": "hyperband"}}, "options.early_stopping", "must be 'none', 'asha' or 'median'"),
        ({"options": {"early_stopping": {"rule": "asha", "eta": "3"}}}, "options.early_stopping", "eta='3'"),
        ({"options": {"early_stopping": [1]}}, "options.early_stopping", "must be a rule name or an object"),
        ({"options": {"policies": {"EARLY_STOP": "yes"}}}, "options.policies.EARLY_STOP",
         "options.policies.EARLY_STOP: must be true or false, got 'yes'"),
        ({"options": {"policies": {"QUICK_EVAL": True}}}, "options.policies.QUICK_EVAL", "the enas strategy sets it"),
        ({"options": {"policies": {"final_trials": 0}}}, "options.policies.final_trials",
         "options.policies.final_trials: must be >= 1, got 0"),
        ({"options": {"policies": {"EARLY_STOP": True, "final_trials": 5}}}, "budget.MODEL_TRIAL_COUNT",
         "MODEL_TRIAL_COUNT=5 leaves no search trial"),
        ({"options": {"fusion": "always"}}, "options.fusion", "must be 'off' or 'auto', got 'always'"),
        ({"options": {"fusion": {"max_group": 0}}}, "options.fusion.max_group", "must be >= 1, got 0"),
        ({"options": {"fusion": {"max_group": 4, "min": 1}}}, "options.fusion.min", "unknown key 'min'"),
        ({"options": {"warm_start": "no"}}, "options.warm_start", "options.warm_start: must be true or false"),
        ({"options": {"deterministic": 1}}, "options.deterministic", "must be true or false, got 1"),
        # The deprecated form: its errors name the field where it was sent.
        ({"train_args": {"enas": {"train_trials": 0}}}, "train_args.enas.train_trials", "must be a whole number >= 1"),
        ({"train_args": {"policies": {"DOWNSCALE": 1}}}, "train_args.policies.DOWNSCALE",
         "train_args.policies.DOWNSCALE: must be true or false, got 1"),
        ({"train_args": {"fusion": "auto"}, "options": {"fusion": "off"}}, "train_args.fusion",
         "'fusion' is sent both in train_args and in options; send it in options only"),
        ({"train_args": {"target": 3}}, "train_args.target", "'train_args.target' must be a string, got a number"),
        ({"train_args": {"target": ""}}, "train_args.target", "'train_args.target' must not be blank"),
        ({"train_args": {"target": "label"}, "target": "label"}, "train_args.target",
         "'target' is sent both in train_args and as the job's target; send it as target only"),
        ({"strategy": "genetic"}, "strategy", "'strategy' is 'genetic'; expected one of auto, random, bayes, tpe"),
        ({"strategy": 3}, "strategy", "'strategy' is 3; expected one of"),
    ]  # fmt: skip
    for overrides, field, message in cases:
        response = client.post("/api/v1/train_jobs", json=_body(w, **overrides), headers=w.alice)
        assert response.status_code == 400, (overrides, response.json)
        error = response.json["error"]
        assert (error["code"], error["field"]) == ("bad_request", field), (overrides, error)
        assert message in error["message"], (overrides, error["message"])
    for data, message in (("not json", "the request body is not valid JSON"), ("[1, 2]", "must be a JSON object")):
        response = client.post("/api/v1/train_jobs", data=data, content_type="application/json", headers=w.alice)
        assert response.status_code == 400
        assert message in response.json["error"]["message"]
    with session_scope(app.extensions["baobab"].engine) as session:
        assert session.scalar(select(func.count(TrainJob.id))) == 0
        assert session.scalar(select(func.count(SubJob.id))) == 0
    assert events.get(timeout=0) is None
    # The same body with the fields fixed is accepted: the refusals above were the fields' own.
    assert client.post("/api/v1/train_jobs", json=_body(w), headers=w.alice).status_code == 201


def test_an_enas_job_its_budget_or_template_cannot_carry_is_refused(
    app: Flask, client: FlaskClient, world: World
) -> None:
    """The driver's own plan check runs at creation: a job answered 201 does not end ERRORED for its plan."""
    w = world
    engine = app.extensions["baobab"].engine
    enas = add_model(engine, w.alice_id, name="a-enas", knob_config=ENAS_KNOB_CONFIG)
    events = app.extensions["baobab"].events.subscribe()
    too_few = job_body(w.a_train, w.a_val, [enas], strategy="enas", budget={"MODEL_TRIAL_COUNT": 3})
    response = client.post("/api/v1/train_jobs", json=too_few, headers=w.alice)
    assert response.status_code == 400, response.json
    error = response.json["error"]
    assert (error["code"], error["field"]) == ("bad_request", "model_ids[0]")
    assert error["message"].startswith(f"model {enas} ('a-enas') cannot be searched: strategy 'enas': ")
    assert "MODEL_TRIAL_COUNT=3 is too small for an ENAS search: it needs at least 9 trials" in error["message"]
    # A template without the policies ENAS sets is refused on its own index.
    no_policies = job_body(w.a_train, w.a_val, [enas, w.a_private], strategy="enas", budget={"MODEL_TRIAL_COUNT": 9})
    response = client.post("/api/v1/train_jobs", json=no_policies, headers=w.alice)
    assert response.status_code == 400, response.json
    assert response.json["error"]["field"] == "model_ids[1]"
    assert "needs a template that supports SHARE_PARAMS and SKIP_TRAIN" in response.json["error"]["message"]
    with session_scope(engine) as session:
        assert session.scalar(select(func.count(TrainJob.id))) == 0
        assert session.scalar(select(func.count(SubJob.id))) == 0
    assert events.get(timeout=0) is None
    # The job's planner options count: two shared trainings per cycle need one trial more.
    longer = job_body(w.a_train, w.a_val, [enas], strategy="enas", budget={"MODEL_TRIAL_COUNT": 9})
    longer["options"] = {"enas": {"train_trials": 2}}
    response = client.post("/api/v1/train_jobs", json=longer, headers=w.alice)
    assert response.status_code == 400, response.json
    assert (
        "MODEL_TRIAL_COUNT=9 is too small for an ENAS search: it needs at least 10" in response.json["error"]["message"]
    )
    # Room for one cycle and the final phases: accepted.
    enough = job_body(w.a_train, w.a_val, [enas], strategy="enas", budget={"MODEL_TRIAL_COUNT": 9})
    assert client.post("/api/v1/train_jobs", json=enough, headers=w.alice).status_code == 201


def _zoo_model(engine: Any, owner_id: int, access: ModelAccess) -> int:
    """Inserts a zoo model row (no parameters behind it); its id."""
    row = ZooModel(
        owner_id=owner_id, access=access, task=Task.TABULAR_CLASSIFICATION, name="base", score=0.5, graph="{}",
        signature="[]", fingerprint="0" * 64, io_signature="io", traced=True, node_count=1, param_count=1,
        params_path=f"zoo/{owner_id}-{access}", owns_params=True, size_bytes=1,
    )  # fmt: skip
    with session_scope(engine) as session:
        session.add(row)
    return row.id


def test_deterministic_with_what_it_cannot_repeat_is_refused_and_alone_is_taken(
    app: Flask, client: FlaskClient, world: World
) -> None:
    """options.deterministic with early stopping, fusion or ENAS: a 400 that says why and how to fix it; alone: a 201,
    and the job's JSON says what waiting cost it (nothing yet: no driver runs here)."""
    w = world
    engine = app.extensions["baobab"].engine
    enas = add_model(engine, w.alice_id, name="d-enas", knob_config=ENAS_KNOB_CONFIG)
    refused = [
        ([w.a_private], {}, {"deterministic": True, "early_stopping": "asha"}, "early stopping (rule 'asha')"),
        ([w.a_private], {}, {"deterministic": True, "fusion": {"max_group": 4}}, "fusion ('max_group')"),
        (
            [enas],
            {"strategy": "enas", "budget": {"MODEL_TRIAL_COUNT": 20}},
            {"deterministic": True},
            "the enas strategy",
        ),
    ]
    for models, fields, options, message in refused:
        body = job_body(w.a_train, w.a_val, models, options=options, **fields)
        response = client.post("/api/v1/train_jobs", json=body, headers=w.alice)
        assert response.status_code == 400, (options, response.json)
        error = response.json["error"]
        assert error["field"] == "model_ids[0]", error
        assert f"deterministic: true does not work with {message}" in error["message"], error["message"]
        assert "deterministic to false" in error["message"]
    with session_scope(engine) as session:
        assert session.scalar(select(func.count(TrainJob.id))) == 0
    body = job_body(w.a_train, w.a_val, [w.a_private], options={"deterministic": True})
    created = client.post("/api/v1/train_jobs", json=body, headers=w.alice)
    assert created.status_code == 201, created.json
    job = client.get(f"/api/v1/train_jobs/fraud/{created.json['app_version']}", headers=w.alice).json
    assert job["options"]["deterministic"] is True and job["determinism"] is None


def test_a_base_model_must_be_a_zoo_model_the_owner_may_see(app: Flask, client: FlaskClient, world: World) -> None:
    """``options.base_model`` names the zoo model the trials train on: an id of one the job's trials may read."""
    w = world
    engine = app.extensions["baobab"].engine
    mine = _zoo_model(engine, w.alice_id, ModelAccess.PRIVATE)
    public = _zoo_model(engine, w.bob_id, ModelAccess.PUBLIC)
    private = _zoo_model(engine, w.bob_id, ModelAccess.PRIVATE)
    events = app.extensions["baobab"].events.subscribe()
    not_an_id = "options.base_model: must be a whole number, got {}"
    not_positive = "options.base_model: must be >= 1, got {}"
    not_seen = "no zoo model {} that you may see: give the id of your own or a PUBLIC zoo model"
    cases: list[tuple[Any, Headers, str]] = [
        ("7", w.alice, not_an_id.format("'7'")),
        (1.0, w.alice, not_an_id.format("1.0")),
        (True, w.alice, not_an_id.format("True")),
        ([mine], w.alice, not_an_id.format(f"[{mine}]")),
        (0, w.alice, not_positive.format("0")),
        (-mine, w.alice, not_positive.format(-mine)),
        (999_999, w.alice, not_seen.format(999_999)),
        (2**70, w.alice, not_seen.format(2**70)),
        # Another user's PRIVATE zoo model reads like a missing one; an admin's job sees no more than anyone's.
        (private, w.alice, not_seen.format(private)),
        (private, w.admin, not_seen.format(private)),
    ]
    for value, headers, message in cases:
        body = _body(w, target="label", options={"base_model": value})
        response = client.post("/api/v1/train_jobs", json=body, headers=headers)
        assert response.status_code == 400, (value, response.json)
        error = response.json["error"]
        assert (error["code"], error["field"], error["message"]) == ("bad_request", "options.base_model", message)
    with session_scope(engine) as session:
        assert session.scalar(select(func.count(TrainJob.id))) == 0
    assert events.get(timeout=0) is None
    # One's own zoo model and a PUBLIC one are accepted, and kept as the job's option.
    for base in (mine, public):
        body = _body(w, target="label", options={"base_model": base})
        created = client.post("/api/v1/train_jobs", json=body, headers=w.alice)
        assert created.status_code == 201, created.json
        assert (created.json["target"], created.json["options"]["base_model"]) == ("label", base)
    # Sent in train_args (deprecated), a base model is refused on the field where it was sent.
    response = client.post("/api/v1/train_jobs", json=_body(w, train_args={"base_model": private}), headers=w.alice)
    assert (response.status_code, response.json["error"]["field"]) == (400, "train_args.base_model")


def test_options_sent_in_train_args_are_taken_for_one_release_with_a_deprecation_header(
    app: Flask, client: FlaskClient, world: World
) -> None:
    """Both forms make the same job; only the old one is answered with a ``Deprecation`` header."""
    w = world
    options = {
        "policies": {"EARLY_STOP": True, "SHARE_PARAMS": "best"},
        "fusion": {"max_group": 2},
        "warm_start": False,
    }
    new = client.post("/api/v1/train_jobs", json=_body(w, train_args={"epochs": 2}, options=options),
                      headers=w.alice)  # fmt: skip
    old = client.post("/api/v1/train_jobs", json=_body(w, train_args={"epochs": 2, **options}), headers=w.alice)
    assert (new.status_code, old.status_code) == (201, 201), (new.json, old.json)
    assert "Deprecation" not in new.headers
    assert old.headers["Deprecation"] == DEPRECATION
    for job in (new.json, old.json):
        assert job["train_args"] == {"epochs": 2}  # train() gets its own arguments, and nothing else
        assert job["options"] == {
            **DEFAULT_OPTIONS, "policies": {**DEFAULT_OPTIONS["policies"], "EARLY_STOP": True, "SHARE_PARAMS": "best"},
            "fusion": {"max_group": 2}, "warm_start": False,
        }  # fmt: skip
    engine = app.extensions["baobab"].engine
    with session_scope(engine) as session:
        rows = session.scalars(select(TrainJob).order_by(TrainJob.id)).all()
        assert [(job.train_args, job.options) for job in rows] == [({"epochs": 2}, new.json["options"])] * 2
    # A request without options in train_args is not deprecated, even with other train args.
    plain = client.post("/api/v1/train_jobs", json=_body(w, train_args={"epochs": 2}), headers=w.alice)
    assert plain.status_code == 201 and "Deprecation" not in plain.headers


def test_a_target_sent_in_train_args_is_taken_for_one_release_with_a_deprecation_header(
    app: Flask, client: FlaskClient, world: World
) -> None:
    """A tabular job's target column is its field; sent in train_args (the form before), it moves there, and train()
    receives it as ``target=`` either way. An image job has no target column: its train_args.target stays as sent."""
    w = world
    new = client.post("/api/v1/train_jobs", json=_body(w, target="label", train_args={"epochs": 2}), headers=w.alice)
    old = client.post("/api/v1/train_jobs", json=_body(w, train_args={"target": "label", "epochs": 2}),
                      headers=w.alice)  # fmt: skip
    assert (new.status_code, old.status_code) == (201, 201), (new.json, old.json)
    assert "Deprecation" not in new.headers
    assert old.headers["Deprecation"] == DEPRECATION
    assert [(job["train_args"], job["target"]) for job in (new.json, old.json)] == [({"epochs": 2}, "label")] * 2
    # A regression job names its target the same way; a job that names none stores none (train() keeps its default).
    regression = _body(w, task="TABULAR_REGRESSION", model_ids=[w.a_regression], target="price")
    unnamed = _body(w, train_args={"epochs": 2})
    images = _body(w, task="IMAGE_CLASSIFICATION", train_dataset_id=w.a_images, val_dataset_id=w.a_images,
                   model_ids=[w.a_images_model], train_args={"target": "label"})  # fmt: skip
    answers = [client.post("/api/v1/train_jobs", json=body, headers=w.alice) for body in (regression, unnamed, images)]
    assert [answer.status_code for answer in answers] == [201] * 3, [answer.json for answer in answers]
    assert not any("Deprecation" in answer.headers for answer in answers)
    assert [(answer.json["train_args"], answer.json["target"]) for answer in answers] == [
        ({}, "price"), ({"epochs": 2}, None), ({"target": "label"}, None)
    ]  # fmt: skip
    with session_scope(app.extensions["baobab"].engine) as session:
        rows = session.execute(select(TrainJob.train_args, TrainJob.target).order_by(TrainJob.id)).tuples().all()
    assert rows == [
        ({"epochs": 2}, "label"), ({"epochs": 2}, "label"), ({}, "price"), ({"epochs": 2}, None),
        ({"target": "label"}, None),
    ]  # fmt: skip


def test_stop(app: Flask, client: FlaskClient, world: World) -> None:
    w = world
    engine = app.extensions["baobab"].engine
    events = app.extensions["baobab"].events.subscribe(EventKind.JOB_STOPPED)
    job = client.post("/api/v1/train_jobs", json=_body(w), headers=w.alice).json
    stopped = client.post("/api/v1/train_jobs/fraud/1/stop", headers=w.alice)
    assert (stopped.status_code, stopped.json["status"]) == (200, "STOPPING"), stopped.json
    assert stopped.json["sub_jobs"] == job["sub_jobs"]
    assert events.get(timeout=5) == Event(EventKind.JOB_STOPPED, job["id"])
    with session_scope(engine) as session:
        assert session.get(TrainJob, job["id"]).status is JobStatus.STOPPING
    # Asking again answers the same and wakes the driver again.
    again = client.post("/api/v1/train_jobs/fraud/1/stop", headers=w.admin)
    assert (again.status_code, again.json["status"]) == (200, "STOPPING")
    assert events.get(timeout=5) == Event(EventKind.JOB_STOPPED, job["id"])
    # A finished job stays as it is, and nothing is published.
    for status in (JobStatus.COMPLETED, JobStatus.ERRORED, JobStatus.STOPPED):
        with session_scope(engine) as session:
            session.get(TrainJob, job["id"]).status = status
        response = client.post("/api/v1/train_jobs/fraud/1/stop", headers=w.alice)
        assert (response.status_code, response.json["status"]) == (200, status.value)
    assert events.get(timeout=0) is None
    missing = client.post("/api/v1/train_jobs/fraud/2/stop", headers=w.alice)
    assert (missing.status_code, missing.json["error"]["message"]) == (404, "no train job 'fraud' version 2")


def test_visibility_of_every_route_by_role_and_owner(
    app: Flask, client: FlaskClient, root: Headers, add_user: AddUser
) -> None:
    engine = app.extensions["baobab"].engine
    users: dict[UserRole, tuple[int, Headers]] = {UserRole.SUPERADMIN: (1, root)}
    for role in (UserRole.ADMIN, UserRole.MODEL_DEVELOPER, UserRole.APP_DEVELOPER):
        user, headers = add_user(role)
        users[role] = (user["id"], headers)
    model = add_model(engine, 1, access=ModelAccess.PUBLIC)
    for role, (_, headers) in users.items():  # every role may create a job, from its own dataset
        data = upload_dataset(client, headers)
        body = job_body(data, data, [model], app=f"app-{role.value}")
        created = client.post("/api/v1/train_jobs", json=body, headers=headers)
        assert created.status_code == 201, (role, created.json)
    admins = (UserRole.SUPERADMIN, UserRole.ADMIN)
    for viewer, (_, headers) in users.items():
        listed = {j["app"] for j in client.get("/api/v1/train_jobs", headers=headers).json["train_jobs"]}
        expected = {f"app-{owner.value}" for owner in users if viewer in admins or owner is viewer}
        assert listed == expected, viewer
        for owner in users:
            app_ = f"app-{owner.value}"
            visible = viewer in admins or owner is viewer
            for method, path in [
                ("GET", f"/api/v1/train_jobs/{app_}"),
                ("GET", f"/api/v1/train_jobs/{app_}/1"),
                ("GET", f"/api/v1/train_jobs/{app_}/1/trials"),
                ("GET", f"/api/v1/train_jobs/{app_}/1/best_trials"),
                ("POST", f"/api/v1/train_jobs/{app_}/1/stop"),
            ]:
                response = client.open(path, method=method, headers=headers)
                assert response.status_code == (200 if visible else 404), (viewer, owner, path, response.json)
                if not visible:
                    assert response.json["error"]["message"].startswith(f"no train job for app '{app_}'") or (
                        response.json["error"]["message"] == f"no train job '{app_}' version 1"
                    )
    with session_scope(engine) as session:
        assert set(session.scalars(select(TrainJob.status))) == {JobStatus.STOPPING}


def test_trial_listing_counts_and_best_trials(app: Flask, client: FlaskClient, world: World) -> None:
    w = world
    engine = app.extensions["baobab"].engine
    job = client.post("/api/v1/train_jobs", json=_body(w), headers=w.alice).json
    sub_a, sub_b = (sub["id"] for sub in job["sub_jobs"])
    done = {"started_at": T0 + timedelta(seconds=10), "finished_at": T0 + timedelta(seconds=12.5)}
    C, E, S, R, X, P = (TrialState[s] for s in ("COMPLETED", "ERRORED", "STOPPED", "RUNNING", "CANCELLED", "PENDING"))
    ids = {
        "a0": add_trial(engine, sub_a, 0, C, 0.9, params_path="params/a0", worker="w-1", attempts=1, **done),
        "a1": add_trial(engine, sub_a, 1, C, 0.7, params_path="params/a1"),
        "a2": add_trial(engine, sub_a, 2, E, error="boom", traceback="Traceback ..."),
        "a3": add_trial(engine, sub_a, 3, S, 0.9, params_path="params/a3"),
        "a4": add_trial(engine, sub_a, 4, R, started_at=T0),
        "a5": add_trial(engine, sub_a, 5, C, 0.95),  # best score, but no parameters kept
        # Bob's template's trials were created before Alice's template's ones.
        "b0": add_trial(engine, sub_b, 0, C, 0.8, params_path="params/b0", created_at=T0 - timedelta(seconds=10)),
        "b1": add_trial(engine, sub_b, 1, X, error="cancelled", created_at=T0 - timedelta(seconds=9)),
        "b2": add_trial(engine, sub_b, 2, P, created_at=T0 - timedelta(seconds=8)),
        "b3": add_trial(engine, sub_b, 3, S, 0.6, params_path="params/b3", created_at=T0 - timedelta(seconds=7)),
    }
    names = {v: k for k, v in ids.items()}
    base = "/api/v1/train_jobs/fraud/1"

    def page(query: str = "", path: str = "/trials") -> dict[str, Any]:
        response = client.get(f"{base}{path}{query}", headers=w.alice)
        assert response.status_code == 200, (query, response.json)
        return response.json

    def order(query: str = "", path: str = "/trials") -> list[str]:
        return [names[t["id"]] for t in page(query, path)["trials"]]

    first = page()
    assert (first["total"], first["page"], first["per_page"]) == (10, 1, 50)
    a0 = next(t for t in first["trials"] if t["id"] == ids["a0"])
    assert a0 == {
        "id": ids["a0"], "train_job_id": job["id"], "sub_job_id": sub_a, "model_id": w.a_private,
        "model_name": "a-private", "number": 0, "knobs": {"lr": 0.01, "layers": 1, "early": False},
        "policies": {"EARLY_STOP": False}, "status": "COMPLETED", "score": 0.9,
        "created_at": T0.isoformat(), "started_at": done["started_at"].isoformat(),
        "finished_at": done["finished_at"].isoformat(), "duration_s": 2.5, "worker": "w-1", "attempts": 1,
        "error": None, "has_params": True, "parent_zoo_model_id": None, "similarity": None, "fused_group": None,
        "fusion_profile": None, "time_breakdown": None,
    }  # fmt: skip
    by_score = ["a5", "a0", "a3", "b0", "a1", "b3", "a2", "a4", "b1", "b2"]  # unscored last, ties by id
    assert order() == order("?sort=-score") == by_score
    assert order("?sort=score") == ["b3", "a1", "b0", "a0", "a3", "a5", "a2", "a4", "b1", "b2"]
    assert order("?sort=number") == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3", "a4", "a5"]
    assert order("?sort=-number") == ["a5", "a4", "b3", "a3", "b2", "a2", "b1", "a1", "b0", "a0"]
    assert order("?sort=created_at") == ["b0", "b1", "b2", "b3", "a0", "a1", "a2", "a3", "a4", "a5"]
    assert order("?sort=-created_at") == ["a5", "a4", "a3", "a2", "a1", "a0", "b3", "b2", "b1", "b0"]
    assert order("?status=COMPLETED,ERRORED&sort=number") == ["a0", "b0", "a1", "a2", "a5"]
    assert order("?status=STOPPED") == ["a3", "b3"]
    assert order(f"?model_id={w.b_public}&sort=number") == ["b0", "b1", "b2", "b3"]
    assert order(f"?model_id={w.b_public}&status=PENDING,RUNNING") == ["b2"]
    assert page("?model_id=999999") == {"trials": [], "total": 0, "page": 1, "per_page": 50}
    # Pages tile the whole listing; past the end is empty, not an error.
    pages = [page(f"?per_page=3&page={n}") for n in range(1, 6)]
    assert [names[t["id"]] for p in pages for t in p["trials"]] == by_score
    assert [len(p["trials"]) for p in pages] == [3, 3, 3, 1, 0]
    assert {(p["total"], p["per_page"]) for p in pages} == {(10, 3)}
    assert page("?per_page=500&page=1")["per_page"] == 500
    assert page("?page=99999999999999")["trials"] == []
    assert page(f"?per_page=2&page=2&sort=number&model_id={w.a_private}")["total"] == 6
    assert order(f"?per_page=2&page=2&sort=number&model_id={w.a_private}") == ["a2", "a3"]
    for query, field, message in [
        ("?page=0", "page", "query parameter 'page' must be between 1 and"),
        ("?page=-1", "page", "between 1 and"),
        ("?page=abc", "page", "query parameter 'page' must be a whole number, got 'abc'"),
        ("?page=1.5", "page", "whole number"),
        ("?page=", "page", "whole number"),
        ("?per_page=0", "per_page", "query parameter 'per_page' must be between 1 and 500, got 0"),
        ("?per_page=501", "per_page", "between 1 and 500, got 501"),
        ("?sort=score%20desc", "sort", "'sort' is 'score desc'; expected one of -score, score, number"),
        ("?sort=id", "sort", "expected one of"),
        ("?status=DONE", "status", "query parameter 'status' holds 'DONE'; give comma-separated states among"),
        ("?status=COMPLETED,", "status", "holds ''"),
        ("?status=", "status", "holds ''"),
        ("?model_id=x", "model_id", "'model_id' must be a whole number"),
        ("?model_id=0", "model_id", "between 1 and"),
        ("?model=1", "model", "unknown query parameter 'model'; known parameters: page, per_page, sort, status"),
    ]:
        response = client.get(f"{base}/trials{query}", headers=w.alice)
        assert response.status_code == 400, (query, response.json)
        assert response.json["error"]["field"] == field, (query, response.json)
        assert message in response.json["error"]["message"], (query, response.json)

    # Counts and the best score, per job and per sub-job, on every route that shows the job.
    shown = client.get(base, headers=w.alice).json
    assert shown["trial_counts"] == {"PENDING": 1, "RUNNING": 1, "COMPLETED": 4, "ERRORED": 1, "STOPPED": 2,
                                     "CANCELLED": 1, "INVALID": 0}  # fmt: skip
    assert shown["best_score"] == 0.95
    assert [sub["trial_counts"] for sub in shown["sub_jobs"]] == [
        {"PENDING": 0, "RUNNING": 1, "COMPLETED": 3, "ERRORED": 1, "STOPPED": 1, "CANCELLED": 0, "INVALID": 0},
        {"PENDING": 1, "RUNNING": 0, "COMPLETED": 1, "ERRORED": 0, "STOPPED": 1, "CANCELLED": 1, "INVALID": 0},
    ]
    assert client.get("/api/v1/train_jobs?include=train_args", headers=w.alice).json["train_jobs"] == [shown]

    # Only COMPLETED trials with parameters, best first, ties to the older; the STOPPED ones (cut off
    # mid-training) only when asked for.
    assert order("", "/best_trials") == ["a0", "b0"]
    assert order("?k=1", "/best_trials") == ["a0"]
    assert order("?k=100", "/best_trials") == ["a0", "b0", "a1"]
    assert order("?k=100&include_stopped=true", "/best_trials") == ["a0", "a3", "b0", "a1", "b3"]
    assert order("?include_stopped=false", "/best_trials") == ["a0", "b0"]
    assert page("", "/best_trials")["trials"][0] == a0
    bad = [("?k=0", "k"), ("?k=101", "k"), ("?k=two", "k"), ("?n=2", "n"), ("?include_stopped=yes", "include_stopped")]
    for query, field in bad:
        response = client.get(f"{base}/best_trials{query}", headers=w.alice)
        assert (response.status_code, response.json["error"]["field"]) == (400, field), query


def test_job_answers_count_trials_without_loading_them(app: Flask, client: FlaskClient, world: World) -> None:
    w = world
    engine = app.extensions["baobab"].engine
    job = client.post("/api/v1/train_jobs", json=_body(w), headers=w.alice).json
    for n in range(30):
        add_trial(engine, job["sub_jobs"][n % 2]["id"], n // 2, TrialState.COMPLETED, n / 100)
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement.lower())

    event.listen(engine, "before_cursor_execute", record)
    try:
        shown = client.get("/api/v1/train_jobs/fraud/1", headers=w.alice).json
        listed = client.get("/api/v1/train_jobs?include=train_args", headers=w.alice).json
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert shown["trial_counts"]["COMPLETED"] == 30 and shown["best_score"] == 0.29
    assert listed["train_jobs"] == [shown]
    on_trials = [s for s in statements if re.search(r"\bfrom trials\b|\bjoin trials\b", s)]
    assert on_trials and all("group by" in s for s in on_trials), on_trials
    assert not any("trials.knobs" in s for s in statements)


def test_concurrent_creations_get_distinct_versions(app: Flask, world: World) -> None:
    w = world
    results: list[Any] = []

    def create() -> None:
        try:
            response = app.test_client().post("/api/v1/train_jobs", json=_body(w, app="race"), headers=w.alice)
            results.append((response.status_code, response.json.get("app_version")))
        except Exception as e:  # reported by the assertion below, not as a thread warning
            results.append(e)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == [(201, 1), (201, 2), (201, 3), (201, 4)], results


def test_events_are_published_after_the_commit(settings: Settings, world: World) -> None:
    w = world
    seen: list[tuple[EventKind, str | None]] = []

    class Witness(LocalEventChannel):
        """Looks the job up in a session of its own as the event is published: it must be committed by then."""

        def publish(self, published: Event) -> None:
            with session_scope(engine) as session:
                job = session.get(TrainJob, published.id)
                seen.append((published.kind, None if job is None else job.status.value))
            super().publish(published)

    app = create_app(settings, events=Witness())
    engine = app.extensions["baobab"].engine
    try:
        client = app.test_client()
        assert client.post("/api/v1/train_jobs", json=_body(w), headers=w.alice).status_code == 201
        assert client.post("/api/v1/train_jobs/fraud/1/stop", headers=w.alice).status_code == 200
    finally:
        engine.dispose()
    assert seen == [(EventKind.JOB_CREATED, "PENDING"), (EventKind.JOB_STOPPED, "STOPPING")]


def test_apps_are_scoped_by_owner(app: Flask, client: FlaskClient, world: World) -> None:
    """Two users (and an admin) use one app name: each gets version 1 and finds their own job by name."""
    w = world
    admin_model = add_model(app.extensions["baobab"].engine, 1, name="admins-model")
    bodies = {
        "alice": (w.alice, _body(w, app="shared")),
        "bob": (
            w.bob,
            _body(w, app="shared", train_dataset_id=w.b_data, val_dataset_id=w.b_data, model_ids=[w.b_public]),
        ),
    }
    jobs = {}
    for who, (headers, body) in bodies.items():
        created = client.post("/api/v1/train_jobs", json=body, headers=headers)
        assert (created.status_code, created.json["app_version"]) == (201, 1), created.json
        jobs[who] = created.json["id"]

    def found(path: str, headers: Headers) -> int:
        response = client.get(path, headers=headers)
        assert response.status_code == 200, response.json
        return int(response.json["id"])

    for who, (headers, _) in bodies.items():
        for path in ("/api/v1/train_jobs/shared", "/api/v1/train_jobs/shared/1"):
            assert found(path, headers) == jobs[who]
        trials = client.get("/api/v1/train_jobs/shared/1/trials", headers=headers)
        assert trials.status_code == 200 and trials.json["total"] == 0
    # Two users have the app: an admin without one of its own says whose.
    ambiguous = client.get("/api/v1/train_jobs/shared", headers=w.admin)
    assert ambiguous.status_code == 404
    assert "?owner_id=" in ambiguous.json["error"]["message"]
    assert found(f"/api/v1/train_jobs/shared?owner_id={w.bob_id}", w.admin) == jobs["bob"]
    assert found(f"/api/v1/train_jobs/shared/1?owner_id={w.alice_id}", w.admin) == jobs["alice"]
    # The admin's own job of that name is version 1 of the admin's app, and comes first.
    admins = _body(w, app="shared", model_ids=[admin_model])
    created = client.post("/api/v1/train_jobs", json=admins, headers=w.admin)
    assert (created.status_code, created.json["app_version"]) == (201, 1), created.json
    assert found("/api/v1/train_jobs/shared", w.admin) == created.json["id"]
    assert found("/api/v1/train_jobs/shared/1", w.admin) == created.json["id"]
    # Nobody else reaches another user's app by naming its owner.
    hidden = client.get(f"/api/v1/train_jobs/shared?owner_id={w.bob_id}", headers=w.alice)
    assert hidden.status_code == 404
    bad = client.get("/api/v1/train_jobs/shared?owner_id=x", headers=w.alice)
    assert (bad.status_code, bad.json["error"]["field"]) == (400, "owner_id")


def test_a_job_keeps_its_seed_and_the_same_seed_seeds_its_sub_jobs_the_same(
    app: Flask, client: FlaskClient, world: World
) -> None:
    w = world
    first = client.post("/api/v1/train_jobs", json=_body(w, app="seeded", seed=42), headers=w.alice)
    again = client.post("/api/v1/train_jobs", json=_body(w, app="seeded", seed=42), headers=w.alice)
    drawn = client.post("/api/v1/train_jobs", json=_body(w, app="drawn"), headers=w.alice)
    assert (first.status_code, again.status_code, drawn.status_code) == (201, 201, 201), drawn.json
    assert first.json["seed"] == again.json["seed"] == 42
    assert isinstance(drawn.json["seed"], int) and 0 <= drawn.json["seed"] < 2**63  # drawn, and shown to repeat it
    shown = client.get("/api/v1/train_jobs/seeded/1", headers=w.alice).json
    assert shown["seed"] == 42

    def sub_seeds(job_id: int) -> list[int]:
        with session_scope(app.extensions["baobab"].engine) as session:
            query = select(SubJob.seed).where(SubJob.train_job_id == job_id).order_by(SubJob.id)
            return list(session.scalars(query))

    assert sub_seeds(first.json["id"]) == sub_seeds(again.json["id"]) == [sub_job_seed(42, 0), sub_job_seed(42, 1)]
    assert sub_seeds(drawn.json["id"]) != sub_seeds(first.json["id"])

    for bad in (-1, 2**63, 1.5, "42", True):
        response = client.post("/api/v1/train_jobs", json=_body(w, app="bad-seed", seed=bad), headers=w.alice)
        assert response.status_code == 400, (bad, response.json)
        assert response.json["error"]["field"] == "seed"
        message = response.json["error"]["message"]
        assert re.match(rf"'seed' (is {bad}; it must be between 0 and {2**63 - 1}|must be an integer, got)", message)
    assert client.get("/api/v1/train_jobs/bad-seed", headers=w.alice).status_code == 404  # nothing was created
