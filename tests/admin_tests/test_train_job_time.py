"""``GET /api/v1/train_jobs/<app>/<version>/time_breakdown``: a job's seconds per phase, in all and per sub-job.

The rows are written here with known times, so the sums are exact; a real worker's are in
``tests/platform_tests/test_platform_zoo.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import T0, add_model, add_trial, job_body, upload_dataset

from baobab.store import TrialState, UserRole

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
PHASES = ["wait", "fetch", "warm_start", "profile", "build", "train", "evaluate", "store"]


@pytest.fixture
def job(app: Flask, client: FlaskClient, add_user: AddUser) -> dict[str, Any]:
    """Alice's job fraud v1 of two templates: trials that ran, one that runs, one that never started."""
    engine = app.extensions["baobab"].engine
    user, headers = add_user(UserRole.APP_DEVELOPER)
    data = upload_dataset(client, headers)
    models = [add_model(engine, user["id"], name=name) for name in ("forest", "mlp")]
    job = client.post("/api/v1/train_jobs", json=job_body(data, data, models), headers=headers).json
    forest, mlp = (sub["id"] for sub in job["sub_jobs"])
    # created at T0 + number s; waits of 2 s and 3 s, then what the workers measured
    ran = {"started_at": T0 + timedelta(seconds=2), "time_breakdown": {"fetch": 1.5, "train": 10.0, "store": 0.5}}
    add_trial(engine, forest, 0, score=0.5, **ran)
    profiled = {"fetch": 0.5, "profile": 4.0, "train": 6.0, "evaluate": 1.0}
    add_trial(engine, forest, 1, TrialState.ERRORED, started_at=T0 + timedelta(seconds=4), time_breakdown=profiled)
    add_trial(engine, mlp, 2, TrialState.RUNNING, started_at=T0 + timedelta(seconds=7))  # waited 5 s, runs
    add_trial(engine, mlp, 3, TrialState.CANCELLED)  # never claimed: no wait counted
    return {"headers": headers, "models": models, "sub_jobs": [forest, mlp]}


def _seconds(**given: float) -> dict[str, float]:
    return {phase: given.get(phase, 0.0) for phase in PHASES}


def test_the_jobs_time_is_summed_per_phase_with_each_started_trials_wait(client: FlaskClient, job) -> None:
    answer = client.get("/api/v1/train_jobs/fraud/1/time_breakdown", headers=job["headers"])
    assert answer.status_code == 200, answer.json
    forest = _seconds(wait=5.0, fetch=2.0, profile=4.0, train=16.0, evaluate=1.0, store=0.5)
    mlp = _seconds(wait=5.0)
    assert answer.json == {
        "phases": PHASES,
        "seconds": {phase: forest[phase] + mlp[phase] for phase in PHASES},
        "total_s": 33.5,
        "trials": 3,
        "sub_jobs": [
            {"sub_job_id": job["sub_jobs"][0], "model_id": job["models"][0], "seconds": forest, "total_s": 28.5,
             "trials": 2},
            {"sub_job_id": job["sub_jobs"][1], "model_id": job["models"][1], "seconds": mlp, "total_s": 5.0,
             "trials": 1},
        ],
    }  # fmt: skip
    # Each trial shows its own measured part.
    trials = client.get("/api/v1/train_jobs/fraud/1/trials?sort=number", headers=job["headers"]).json["trials"]
    assert [t["time_breakdown"] for t in trials][:3] == [
        {"fetch": 1.5, "train": 10.0, "store": 0.5},
        {"fetch": 0.5, "profile": 4.0, "train": 6.0, "evaluate": 1.0},
        None,
    ]


@pytest.mark.parametrize(
    ("path", "status", "field", "message"),
    [
        ("/api/v1/train_jobs/fraud/1/time_breakdown?per_page=3", 400, "per_page", "per_page"),
        ("/api/v1/train_jobs/fraud/1/time_breakdown?owner_id=x", 400, "owner_id", "owner_id"),
        ("/api/v1/train_jobs/fraud/9/time_breakdown", 404, None, "no train job 'fraud' version 9"),
        ("/api/v1/train_jobs/nope/1/time_breakdown", 404, None, "no train job 'nope' version 1"),
    ],
)
def test_bad_requests_are_refused_naming_what_is_wrong(
    client: FlaskClient, job, path: str, status: int, field: str | None, message: str
) -> None:
    answer = client.get(path, headers=job["headers"])
    assert answer.status_code == status, answer.json
    assert answer.json["error"]["field"] == field and message in answer.json["error"]["message"]


def test_another_users_job_is_not_found(client: FlaskClient, job, add_user: AddUser) -> None:
    _, bob = add_user(UserRole.APP_DEVELOPER)
    answer = client.get("/api/v1/train_jobs/fraud/1/time_breakdown", headers=bob)
    assert answer.status_code == 404 and "fraud" in answer.json["error"]["message"]
