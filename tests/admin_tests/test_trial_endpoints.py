"""``/api/v1/trials``: one trial with its traceback, logs by pages, metrics, parameters; visible when its job is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from train_job_world import T0, add_model, add_trial, job_body, upload_dataset

from baobab.store import (
    InterimMetric,
    ModelAccess,
    Trial,
    TrialLog,
    TrialState,
    UserRole,
    fuse_trials,
    params_from_bytes,
    params_to_bytes,
    requeue_trial,
    session_scope,
)

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]


@pytest.fixture
def developer(add_user: AddUser) -> tuple[int, Headers]:
    user, headers = add_user(UserRole.MODEL_DEVELOPER)
    return user["id"], headers


def _job(app: Flask, client: FlaskClient, owner_id: int, headers: Headers, name: str = "fraud") -> dict[str, Any]:
    """A train job of ``owner_id`` on its own dataset and template, created through the API."""
    data = upload_dataset(client, headers)
    model = add_model(app.extensions["baobab"].engine, owner_id, name=f"{name}-model")
    response = client.post("/api/v1/train_jobs", json=job_body(data, data, [model], app=name), headers=headers)
    assert response.status_code == 201, response.json
    return response.json


def test_trial_traceback_logs_metrics_and_params(
    app: Flask, client: FlaskClient, developer: tuple[int, Headers]
) -> None:
    owner_id, dev = developer
    engine = app.extensions["baobab"].engine
    artifacts = app.extensions["baobab"].artifacts
    job = _job(app, client, owner_id, dev)
    sub_job = job["sub_jobs"][0]["id"]
    failed = add_trial(
        engine, sub_job, 0, TrialState.ERRORED, error="ValueError: bad lr", traceback="Traceback (most recent...)\n",
        started_at=T0, finished_at=T0 + timedelta(seconds=3), worker="local-1", attempts=2,
    )  # fmt: skip
    done = add_trial(
        engine, sub_job, 1, TrialState.COMPLETED, 0.75, params_path=f"params/trial-{sub_job}-1.safetensors"
    )
    lost = add_trial(engine, sub_job, 2, TrialState.STOPPED, 0.5, params_path="params/deleted.safetensors")
    params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "epochs": 3}
    artifacts.put_bytes(f"params/trial-{sub_job}-1.safetensors", params_to_bytes(params))
    with session_scope(engine) as session:
        session.add_all(TrialLog(trial_id=done, time=T0 + timedelta(seconds=i), line=f"line {i}") for i in range(7))
        session.add(TrialLog(trial_id=failed, line="other trial"))
        for step, loss in [(0, 1.0), (1, 0.5), (2, 0.25)]:
            session.add(InterimMetric(trial_id=done, step=step, metrics={"loss": loss}, time=T0))
    with session_scope(engine) as session:
        log_ids = list(session.scalars(select(TrialLog.id).where(TrialLog.trial_id == done).order_by(TrialLog.id)))

    shown = client.get(f"/api/v1/trials/{failed}", headers=dev)
    assert shown.status_code == 200, shown.json
    assert shown.json == {
        "id": failed, "train_job_id": job["id"], "sub_job_id": sub_job, "model_id": job["sub_jobs"][0]["model_id"],
        "model_name": "fraud-model", "number": 0, "knobs": {"lr": 0.01, "layers": 1, "early": False},
        "policies": {"EARLY_STOP": False}, "status": "ERRORED", "score": None, "created_at": T0.isoformat(),
        "started_at": T0.isoformat(), "finished_at": (T0 + timedelta(seconds=3)).isoformat(), "duration_s": 3.0,
        "worker": "local-1", "attempts": 2, "error": "ValueError: bad lr", "has_params": False,
        "parent_zoo_model_id": None, "similarity": None, "fused_group": None, "fusion_profile": None,
        "traceback": "Traceback (most recent...)\n", "phase": None,
        "lineage": {"from": "scratch", "chain": [], "inherited_epochs": 0, "truncated": False},
        "has_architecture": False, "time_breakdown": None,
    }  # fmt: skip
    ok = client.get(f"/api/v1/trials/{done}", headers=dev).json
    assert (ok["traceback"], ok["has_params"], ok["duration_s"], ok["score"]) == (None, True, None, 0.75)

    def logs(query: str = "") -> list[str]:
        response = client.get(f"/api/v1/trials/{done}/logs{query}", headers=dev)
        assert response.status_code == 200, (query, response.json)
        return [entry["line"] for entry in response.json["logs"]]

    first = client.get(f"/api/v1/trials/{done}/logs", headers=dev).json["logs"]
    assert first[0] == {"id": log_ids[0], "time": T0.isoformat(), "line": "line 0"}
    assert [entry["id"] for entry in first] == log_ids
    assert logs() == [f"line {i}" for i in range(7)]
    assert logs("?limit=3") == ["line 0", "line 1", "line 2"]
    assert logs(f"?after={log_ids[2]}&limit=3") == ["line 3", "line 4", "line 5"]
    assert logs(f"?after={log_ids[5]}") == ["line 6"]
    assert logs(f"?after={log_ids[6]}") == []
    assert logs("?after=0&limit=10000") == logs()
    for query, field in [
        ("?after=-1", "after"), ("?after=x", "after"), ("?limit=0", "limit"), ("?limit=10001", "limit"),
        ("?limit=", "limit"), ("?since=3", "since"),
    ]:  # fmt: skip
        response = client.get(f"/api/v1/trials/{done}/logs{query}", headers=dev)
        assert (response.status_code, response.json["error"]["field"]) == (400, field), query

    metrics = client.get(f"/api/v1/trials/{done}/metrics", headers=dev)
    assert metrics.json == {
        "metrics": [
            {"step": s, "time": T0.isoformat(), "metrics": {"loss": v}} for s, v in [(0, 1.0), (1, 0.5), (2, 0.25)]
        ]
    }
    assert client.get(f"/api/v1/trials/{failed}/metrics", headers=dev).json == {"metrics": []}

    download = client.get(f"/api/v1/trials/{done}/params", headers=dev)
    assert download.status_code == 200
    assert download.mimetype == "application/octet-stream"
    assert download.headers["Content-Disposition"] == f"attachment; filename=trial-{done}.safetensors"
    loaded = params_from_bytes(download.data)
    assert loaded["epochs"] == 3 and np.array_equal(loaded["w"], params["w"])
    for trial, message in [
        (failed, f"trial {failed} has no parameters"),
        (lost, f"the parameters of trial {lost} are missing from the artifact store"),
    ]:
        response = client.get(f"/api/v1/trials/{trial}/params", headers=dev)
        assert (response.status_code, response.json["error"]["message"].split(" (")[0]) == (404, message)
        assert "deleted.safetensors" not in response.json["error"]["message"]  # no storage key leaks

    for path in ("", "/logs", "/metrics", "/params"):
        for trial_id in (999_999, 0, 2**70):
            missing = client.get(f"/api/v1/trials/{trial_id}{path}", headers=dev)
            assert (missing.status_code, missing.json["error"]["message"]) == (404, f"no trial with id {trial_id}")
        assert client.get(f"/api/v1/trials/{done}{path}").status_code == 401
    unknown = client.get(f"/api/v1/trials/{done}?full=1", headers=dev)
    assert (unknown.status_code, unknown.json["error"]["field"]) == (400, "full")


def test_trials_are_visible_when_their_job_is(
    app: Flask, client: FlaskClient, root: Headers, add_user: AddUser
) -> None:
    engine = app.extensions["baobab"].engine
    artifacts = app.extensions["baobab"].artifacts
    users: dict[UserRole, tuple[int, Headers]] = {UserRole.SUPERADMIN: (1, root)}
    for role in (UserRole.ADMIN, UserRole.MODEL_DEVELOPER, UserRole.APP_DEVELOPER):
        user, headers = add_user(role)
        users[role] = (user["id"], headers)
    trials: dict[UserRole, int] = {}
    for role, (user_id, headers) in users.items():
        job = _job(app, client, user_id, headers, name=f"app-{role.value}")
        key = f"params/{role.value}.safetensors"
        artifacts.put_bytes(key, params_to_bytes({"w": np.zeros(2)}))
        trials[role] = add_trial(engine, job["sub_jobs"][0]["id"], 0, TrialState.COMPLETED, 0.5, params_path=key)
        with session_scope(engine) as session:
            session.add(TrialLog(trial_id=trials[role], line="hello"))
            session.add(InterimMetric(trial_id=trials[role], step=0, metrics={"acc": 0.5}))
    # A PUBLIC template makes its trials no more visible: visibility follows the job.
    public = add_model(engine, 1, access=ModelAccess.PUBLIC, name="public")
    _, dev = users[UserRole.APP_DEVELOPER]
    data = upload_dataset(client, dev)
    on_public = client.post("/api/v1/train_jobs", json=job_body(data, data, [public], app="on-public"), headers=dev)
    public_trial = add_trial(engine, on_public.json["sub_jobs"][0]["id"], 0)

    admins = (UserRole.SUPERADMIN, UserRole.ADMIN)
    for viewer, (_, headers) in users.items():
        for owner, trial_id in [*trials.items(), (UserRole.APP_DEVELOPER, public_trial)]:
            visible = viewer in admins or viewer is owner
            for path in ("", "/logs", "/metrics", "/params"):
                response = client.get(f"/api/v1/trials/{trial_id}{path}", headers=headers)
                if visible:
                    assert response.status_code == (404 if (path, trial_id) == ("/params", public_trial) else 200)
                else:
                    assert (response.status_code, response.json["error"]["message"]) == (
                        404, f"no trial with id {trial_id}"
                    ), (viewer, owner, path)  # fmt: skip
            if visible:
                listed = client.get(f"/api/v1/trials/{trial_id}/logs", headers=headers).json["logs"]
                assert [entry["line"] for entry in listed] == ([] if trial_id == public_trial else ["hello"])
    assert client.get(f"/api/v1/trials/{public_trial}", headers=users[UserRole.MODEL_DEVELOPER][1]).status_code == 404


def test_a_fused_group_shows_on_its_members_with_its_size(
    app: Flask, client: FlaskClient, developer: tuple[int, Headers]
) -> None:
    owner_id, dev = developer
    engine = app.extensions["baobab"].engine
    job = _job(app, client, owner_id, dev)
    sub_job = job["sub_jobs"][0]["id"]
    first, *rest = [add_trial(engine, sub_job, number, TrialState.PENDING) for number in range(3)]
    add_trial(engine, sub_job, 3, TrialState.COMPLETED, 0.4, params_path="params/alone")  # run alone
    with session_scope(engine) as session:
        assert fuse_trials(session, [first, *rest]) == first  # as the job driver marks a group it submits
        for trial_id in (first, *rest):
            trial = session.get_one(Trial, trial_id)
            trial.status, trial.score, trial.params_path = TrialState.COMPLETED, 0.5, f"params/{trial_id}"
    listed = client.get(f"/api/v1/train_jobs/{job['app']}/{job['app_version']}/trials?sort=number", headers=dev)
    assert [t["fused_group"] for t in listed.json["trials"]] == [{"id": first, "size": 3}] * 3 + [None]
    best = client.get(f"/api/v1/train_jobs/{job['app']}/{job['app_version']}/best_trials?k=4", headers=dev)
    assert [t["fused_group"] for t in best.json["trials"]] == [{"id": first, "size": 3}] * 3 + [None]
    detail = client.get(f"/api/v1/trials/{rest[1]}", headers=dev).json["fused_group"]
    members = [{"id": trial_id, "number": number} for number, trial_id in enumerate([first, *rest])]
    assert detail == {"id": first, "size": 3, "members": members}
    with session_scope(engine) as session:
        session.get_one(Trial, rest[0]).status = TrialState.RUNNING
    with session_scope(engine) as session:
        assert requeue_trial(session, rest[0], now=T0)  # lost and run again alone: it leaves the group
    assert client.get(f"/api/v1/trials/{first}", headers=dev).json["fused_group"]["size"] == 2
    assert client.get(f"/api/v1/trials/{rest[0]}", headers=dev).json["fused_group"] is None
