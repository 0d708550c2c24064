"""``POST /api/v1/train_jobs/forecast``: how long a job would take on N workers, from its templates' finished trials."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select
from train_job_world import T0, add_model, add_trial, job_body, upload_dataset

from baobab.store import ModelAccess, SubJob, TrainJob, Trial, UserRole, session_scope

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
URL = "/api/v1/train_jobs/forecast"


@pytest.fixture
def alice(app: Flask, client: FlaskClient, add_user: AddUser) -> dict[str, Any]:
    """Alice, her data, two PUBLIC templates, and a job of both whose trials took 10 s each (6 of each)."""
    engine = app.extensions["baobab"].engine
    user, headers = add_user(UserRole.APP_DEVELOPER)
    data = upload_dataset(client, headers)
    model = add_model(engine, user["id"], access=ModelAccess.PUBLIC, name="ten-seconds")
    twin = add_model(engine, user["id"], access=ModelAccess.PUBLIC, name="twin")
    job = client.post("/api/v1/train_jobs", json=job_body(data, data, [model, twin]), headers=headers).json
    for sub_job in job["sub_jobs"]:
        for number in range(6):
            start = T0 + timedelta(seconds=20 * number)
            end = start + timedelta(seconds=10)
            add_trial(engine, sub_job["id"], number, score=0.5, started_at=start, finished_at=end)
    return {"headers": headers, "data": data, "model": model, "twin": twin}


def _forecast(client: FlaskClient, who: dict[str, Any], query: str = "", **overrides: Any) -> Any:
    body = job_body(who["data"], who["data"], [who["model"]], **overrides)
    return client.post(f"{URL}{query}", json=body, headers=who["headers"])


def _by_method(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["method"]: f for f in answer["forecasts"]}


def test_the_forecast_plays_the_job_on_the_workers_asked_for(app: Flask, client: FlaskClient, alice) -> None:
    jobs_before = _count_jobs(app)
    one = _forecast(client, alice, "?workers=1&slots=1", budget={"MODEL_TRIAL_COUNT": 8})
    assert one.status_code == 200, one.json
    assert (one.json["workers"], one.json["slots"], one.json["trials"]) == (1, 1, 8)
    assert one.json["measured_trials"] == 6 and one.json["fallback"] is None
    plans = _by_method(one.json)
    assert set(plans) == {"search", "fcfs", "largest_first", "shortest_first"}
    assert plans["fcfs"]["seconds"] == pytest.approx(80.0, rel=0.05)  # 8 trials of 10 s, one at a time
    assert plans["fcfs"]["trials_finished"] == 8 and plans["fcfs"]["utilisation"] == pytest.approx(1.0)
    four = _by_method(_forecast(client, alice, "?workers=2&slots=2", budget={"MODEL_TRIAL_COUNT": 8}).json)
    assert four["fcfs"]["seconds"] == pytest.approx(20.0, rel=0.05)  # four at a time
    assert four["search"]["seconds"] <= four["fcfs"]["seconds"] + 1e-6
    assert _count_jobs(app) == jobs_before  # nothing was created


def test_time_hours_bounds_the_trials_that_finish(client: FlaskClient, alice) -> None:
    answer = _forecast(client, alice, "?slots=1", budget={"MODEL_TRIAL_COUNT": 8, "TIME_HOURS": 0.02}).json
    fcfs = _by_method(answer)["fcfs"]
    assert (fcfs["trials_finished"], fcfs["trials_unfinished"]) == (7, 1)  # 72 s: seven trials of 10 s
    assert fcfs["seconds"] == pytest.approx(72.0)
    open_count = _forecast(client, alice, "?slots=2", budget={"TIME_HOURS": 0.02}).json
    assert _by_method(open_count)["fcfs"]["trials_finished"] == 14  # as many as 72 s allow on two slots
    two_templates = client.post(
        URL,
        json=job_body(alice["data"], alice["data"], [alice["model"], alice["twin"]], budget={"MODEL_TRIAL_COUNT": 3}),
        headers=alice["headers"],
    ).json
    assert two_templates["trials"] == 6  # MODEL_TRIAL_COUNT is per template


def test_a_template_nothing_has_finished_of_gives_no_forecast_and_says_why(
    app: Flask, client: FlaskClient, alice, add_user: AddUser
) -> None:
    engine = app.extensions["baobab"].engine
    fresh = add_model(engine, 1, access=ModelAccess.PUBLIC, name="fresh")
    answer = client.post(
        URL, json=job_body(alice["data"], alice["data"], [alice["model"], fresh]), headers=alice["headers"]
    ).json
    assert answer["forecasts"] == []
    assert answer["fallback"] == f"no trial of model {fresh} ('fresh') has finished yet: nothing to forecast from"
    # another user does not learn from Alice's trials: her job is hers
    user, bob = add_user(UserRole.APP_DEVELOPER)
    data = upload_dataset(client, bob)
    theirs = client.post(URL, json=job_body(data, data, [alice["model"]]), headers=bob).json
    assert theirs["measured_trials"] == 0 and theirs["fallback"].startswith(f"no trial of model {alice['model']}")


@pytest.mark.parametrize(
    ("query", "overrides", "field", "message"),
    [
        ("?workers=0", {}, "workers", "query parameter 'workers' must be between 1 and 1024, got 0"),
        ("?slots=many", {}, "slots", "query parameter 'slots' must be a whole number, got 'many'"),
        ("?gpus=1", {}, "gpus", "unknown query parameter 'gpus'"),
        ("", {"model_ids": []}, "model_ids", "'model_ids' has 0 items; it needs at least 1"),
        ("", {"model_ids": [999]}, "model_ids[0]", "no model 999"),
        ("", {"budget": {"MODEL_TRIAL_COUNT": 0}}, "budget.MODEL_TRIAL_COUNT", "must be between"),
        ("", {"options": {"fusion": "always"}}, "options.fusion", "must be"),
        ("", {"budget": {"MODEL_TRIAL_COUNT": 2001}}, "budget.MODEL_TRIAL_COUNT", "at most 2000 trials"),
    ],
)
def test_bad_input_is_refused_by_name(client: FlaskClient, alice, query, overrides, field, message) -> None:
    response = _forecast(client, alice, query, **overrides)
    assert response.status_code == 400, response.json
    error = response.json["error"]
    assert (error["code"], error["field"]) == ("bad_request", field)
    assert message in error["message"]


def _count_jobs(app: Flask) -> int:
    with session_scope(app.extensions["baobab"].engine) as session:
        return session.scalar(select(func.count()).select_from(TrainJob))


def test_a_fused_trial_counts_as_its_share_of_its_group(app: Flask, client: FlaskClient, alice) -> None:
    """Two trials trained as one group in 20 s, where the profile says a group of two trains no faster:
    one trial alone takes 10 s."""
    engine = app.extensions["baobab"].engine
    model = add_model(engine, 1, access=ModelAccess.PUBLIC, name="fused")
    body = job_body(alice["data"], alice["data"], [model])
    job = client.post("/api/v1/train_jobs", json=body, headers=alice["headers"]).json
    sub_job = job["sub_jobs"][0]["id"]
    done = {"started_at": T0, "finished_at": T0 + timedelta(seconds=20)}
    profile = {"samples_per_s": {"1": 100.0, "2": 100.0}, "best": 1, "seconds": 1.0, "reason": None}
    first = add_trial(engine, sub_job, 0, score=0.5, fusion_profile=profile, **done)
    with session_scope(engine) as session:
        session.get(Trial, first).fused_group = first
    add_trial(engine, sub_job, 1, score=0.5, fused_group=first, **done)
    answer = client.post(
        f"{URL}?slots=1", json={**body, "budget": {"MODEL_TRIAL_COUNT": 2}}, headers=alice["headers"]
    ).json
    assert _by_method(answer)["fcfs"]["seconds"] == pytest.approx(20.0, rel=0.05)  # two trials of 10 s


def test_trials_on_the_job_s_own_dataset_are_preferred(app: Flask, client: FlaskClient, alice) -> None:
    """The template took 10 s a trial on Alice's first dataset and 40 s on a larger one."""
    engine = app.extensions["baobab"].engine
    larger = upload_dataset(client, alice["headers"])
    body = job_body(larger, larger, [alice["model"]], budget={"MODEL_TRIAL_COUNT": 2})
    job = client.post("/api/v1/train_jobs", json=body, headers=alice["headers"]).json
    for number in range(2):
        add_trial(
            engine, job["sub_jobs"][0]["id"], number, score=0.5, started_at=T0, finished_at=T0 + timedelta(seconds=40)
        )
    on_larger = client.post(f"{URL}?slots=1", json=body, headers=alice["headers"]).json
    assert on_larger["measured_trials"] == 2
    assert _by_method(on_larger)["fcfs"]["seconds"] == pytest.approx(80.0, rel=0.05)
    on_first = _forecast(client, alice, "?slots=1", budget={"MODEL_TRIAL_COUNT": 2}).json
    assert on_first["measured_trials"] == 6
    assert _by_method(on_first)["fcfs"]["seconds"] == pytest.approx(20.0, rel=0.05)
    elsewhere = upload_dataset(client, alice["headers"])  # nothing ran on it: every trial of the template counts
    anywhere = _forecast(client, alice, "?slots=1", train_dataset_id=elsewhere, budget={"MODEL_TRIAL_COUNT": 2}).json
    assert anywhere["measured_trials"] == 8


def test_under_asha_a_trial_counts_for_its_expected_share_of_its_epochs(app: Flask, client: FlaskClient, alice) -> None:
    """The twin's trials trained 10 epochs in 10 s: under ASHA (eta 3) each is taken to run a third of them;
    the other template's trials report no epochs, so no rule can tell their share and they count whole."""
    with session_scope(app.extensions["baobab"].engine) as session:
        for trial in session.scalars(select(Trial).join(SubJob).where(SubJob.model_template_id == alice["twin"])):
            trial.knobs = {**trial.knobs, "epochs": 10}
    asha = {"early_stopping": {"rule": "asha", "eta": 3}}
    budget = {"MODEL_TRIAL_COUNT": 3}

    def fcfs_seconds(model: int, options: dict[str, Any]) -> float:
        body = job_body(alice["data"], alice["data"], [model], budget=budget, options=options)
        answer = client.post(f"{URL}?slots=1", json=body, headers=alice["headers"])
        assert answer.status_code == 200, answer.json
        return _by_method(answer.json)["fcfs"]["seconds"]

    assert fcfs_seconds(alice["twin"], {}) == pytest.approx(30.0, rel=0.05)
    assert fcfs_seconds(alice["twin"], asha) == pytest.approx(30.0 * (2 + 2 / 3 + 6 / 9) / 10, rel=0.05)
    assert fcfs_seconds(alice["model"], asha) == pytest.approx(30.0, rel=0.05)
