"""What the web UI reads and does on trials: changes since a poll, more sorts, budget used, stopping one trial."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import update
from train_job_world import T0, add_model, add_trial, job_body, upload_dataset

from baobab.store import Event, EventKind, SubJob, TrainJob, Trial, TrialState, UserRole, session_scope

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]


def _job(
    flask_app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], n: int = 1, **body: Any
) -> dict[str, Any]:
    """A job of ``owner`` over ``n`` templates of their own; ``body`` overrides fields of the request."""
    user, headers = owner
    data = upload_dataset(client, headers)
    engine = flask_app.extensions["baobab"].engine
    models = [add_model(engine, user["id"], name=f"{body.get('app', 'fraud')}-m{i}") for i in range(n)]
    response = client.post("/api/v1/train_jobs", json=job_body(data, data, models, **body), headers=headers)
    assert response.status_code == 201, response.json
    return response.json


def _points(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The trials of a ``trials/changes`` answer as objects (each comes as an array of its ``fields``)."""
    return [dict(zip(answer["fields"], row, strict=True)) for row in answer["trials"]]


@pytest.fixture
def developer(add_user: AddUser) -> tuple[dict[str, Any], Headers]:
    return add_user(UserRole.APP_DEVELOPER)


def test_changes_are_the_new_trials_and_the_open_ones(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    engine = app.extensions["baobab"].engine
    job = _job(app, client, developer)
    headers = developer[1]
    sub = job["sub_jobs"][0]["id"]
    url = "/api/v1/train_jobs/fraud/1/trials/changes"
    done = add_trial(engine, sub, 0, TrialState.COMPLETED, 0.5, started_at=T0, finished_at=T0 + timedelta(seconds=2))
    running = add_trial(engine, sub, 1, TrialState.RUNNING, started_at=T0, worker="local-1")
    pending = add_trial(engine, sub, 2, TrialState.PENDING)

    first = client.get(url, headers=headers)
    assert first.status_code == 200, first.json
    assert first.json["last_id"] == pending and first.json["more"] is False
    assert [t["id"] for t in _points(first.json)] == [done, running, pending]
    assert _points(first.json)[0] == {
        "id": done, "number": 0, "model_id": job["sub_jobs"][0]["model_id"], "status": "COMPLETED", "score": 0.5,
        "finished_at": (T0 + timedelta(seconds=2)).timestamp(),
        "knobs": {"lr": 0.01, "layers": 1, "early": False}, "policies": {"EARLY_STOP": False},
    }  # fmt: skip
    assert _points(first.json)[1]["finished_at"] is None and _points(first.json)[1]["score"] is None

    # Nothing new, nothing open: nothing.
    quiet = client.get(f"{url}?after_id={pending}", headers=headers)
    assert quiet.json == {"fields": first.json["fields"], "trials": [], "last_id": pending, "more": False}

    # The running trial finished, a new one came: both, and only them.
    with session_scope(engine) as session:
        session.execute(update(Trial).where(Trial.id == running).values(status=TrialState.COMPLETED, score=0.9))
    new = add_trial(engine, sub, 3, TrialState.PENDING)
    again = client.get(f"{url}?after_id={pending}&open={running},{pending}", headers=headers)
    assert again.status_code == 200, again.json
    shown = {t["id"]: (t["status"], t["score"]) for t in _points(again.json)}
    assert shown == {running: ("COMPLETED", 0.9), pending: ("PENDING", None), new: ("PENDING", None)}
    assert again.json["last_id"] == new

    # An open id above after_id comes once; ids of other jobs' trials come not at all.
    other = _job(app, client, developer, app="other")
    foreign = add_trial(engine, other["sub_jobs"][0]["id"], 0, TrialState.RUNNING)
    mixed = client.get(f"{url}?after_id={pending}&open={foreign},{new}", headers=headers)
    assert [t["id"] for t in _points(mixed.json)] == [new]


def test_changes_come_in_pages_of_limit(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    engine = app.extensions["baobab"].engine
    job = _job(app, client, developer)
    ids = [add_trial(engine, job["sub_jobs"][0]["id"], n, TrialState.COMPLETED, n / 10) for n in range(5)]
    url = "/api/v1/train_jobs/fraud/1/trials/changes"
    page = client.get(f"{url}?limit=2", headers=developer[1]).json
    assert [t["id"] for t in _points(page)] == ids[:2] and page["more"] is True and page["last_id"] == ids[1]
    page = client.get(f"{url}?limit=2&after_id={ids[3]}", headers=developer[1]).json
    assert [t["id"] for t in _points(page)] == ids[4:] and page["more"] is False


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("?open=1,x", "open", "query parameter 'open' holds 'x'; give comma-separated trial ids"),
        ("?open=0", "open", "holds '0'"),
        (f"?open={','.join(str(i) for i in range(1, 1002))}", "open", "names 1001 trials, at most 1000"),
        ("?after_id=-1", "after_id", "must be between 0 and"),
        ("?limit=0", "limit", "must be between 1 and 100000"),
        ("?since=3", "since", "unknown query parameter 'since'; known parameters: after_id, open, limit"),
    ],
)
def test_bad_change_queries_are_refused(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers], query: str, field: str, message: str
) -> None:
    _job(app, client, developer)
    response = client.get(f"/api/v1/train_jobs/fraud/1/trials/changes{query}", headers=developer[1])
    assert response.status_code == 400
    assert response.json["error"]["field"] == field
    assert message in response.json["error"]["message"]


def test_someone_elses_changes_are_not_found(
    app: Flask, client: FlaskClient, add_user: AddUser, developer: tuple[dict[str, Any], Headers]
) -> None:
    _job(app, client, developer)
    _, stranger = add_user(UserRole.APP_DEVELOPER)
    response = client.get("/api/v1/train_jobs/fraud/1/trials/changes", headers=stranger)
    assert response.status_code == 404
    assert response.json["error"]["message"] == "no train job 'fraud' version 1"


def test_trials_sort_by_duration_status_and_worker(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    engine = app.extensions["baobab"].engine
    job = _job(app, client, developer)
    sub = job["sub_jobs"][0]["id"]
    spans = {0: 30, 1: 5, 2: None, 3: 3600, 4: 5}  # seconds between start and finish
    states = [TrialState.COMPLETED, TrialState.ERRORED, TrialState.RUNNING, TrialState.STOPPED, TrialState.CANCELLED]
    workers = ["b", None, "a", "c", "a"]
    for n, span in spans.items():
        finished = None if span is None else T0 + timedelta(seconds=span)
        add_trial(engine, sub, n, states[n], started_at=T0, finished_at=finished, worker=workers[n])

    def order(sort: str) -> list[int]:
        response = client.get(f"/api/v1/train_jobs/fraud/1/trials?sort={sort}", headers=developer[1])
        assert response.status_code == 200, response.json
        return [t["number"] for t in response.json["trials"]]

    assert order("duration") == [1, 4, 0, 3, 2]  # ties by id; no duration last
    assert order("-duration") == [3, 0, 1, 4, 2]
    assert order("status") == [2, 0, 3, 1, 4]  # RUNNING, PENDING, COMPLETED, STOPPED, ERRORED, CANCELLED
    assert order("-status") == [4, 1, 3, 0, 2]
    assert order("worker") == [2, 4, 0, 3, 1]  # no worker last
    assert order("-worker") == [3, 0, 2, 4, 1]


def test_an_invalid_trial_is_listed_filtered_counted_and_shown_with_its_message(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    engine = app.extensions["baobab"].engine
    job = _job(app, client, developer)
    sub = job["sub_jobs"][0]["id"]
    error = "train() raised InvalidArchitectureError: a 3x3 feature map cannot take a 5x5 kernel"
    states = [TrialState.COMPLETED, TrialState.INVALID, TrialState.ERRORED, TrialState.STOPPED]
    ids = [add_trial(engine, sub, n, state, 0.5 if state.is_scored() else None) for n, state in enumerate(states)]
    with session_scope(engine) as session:
        session.execute(update(Trial).where(Trial.id == ids[1]).values(error=error, traceback="Traceback ..."))
    headers = developer[1]
    base = "/api/v1/train_jobs/fraud/1"

    invalid = client.get(f"{base}/trials?status=INVALID", headers=headers).json
    assert [(t["id"], t["status"], t["score"], t["error"]) for t in invalid["trials"]] == [
        (ids[1], "INVALID", None, error)
    ]
    unscored = client.get(f"{base}/trials?status=ERRORED,INVALID&sort=number", headers=headers).json["trials"]
    assert [t["id"] for t in unscored] == [ids[1], ids[2]]
    # sort=status: what ran to a score, then what ran to none (INVALID before ERRORED).
    by_status = client.get(f"{base}/trials?sort=status", headers=headers).json["trials"]
    assert [t["status"] for t in by_status] == ["COMPLETED", "STOPPED", "INVALID", "ERRORED"]
    shown = client.get(base, headers=headers).json
    assert shown["trial_counts"]["INVALID"] == 1 and shown["sub_jobs"][0]["trial_counts"]["INVALID"] == 1
    assert shown["budget_used"]["trials"] == 4  # the invalid trial was a proposal: it spent budget
    one = client.get(f"/api/v1/trials/{ids[1]}", headers=headers).json
    assert (one["status"], one["error"], one["traceback"]) == ("INVALID", error, "Traceback ...")

    # The OpenAPI document lists the state in every enum of trial states (those naming CANCELLED).
    enums = list(_enums(client.get("/api/v1/openapi.json").json))
    trial_states = [values for values in enums if "CANCELLED" in values]
    assert trial_states and all("INVALID" in values for values in trial_states)


def _enums(node: Any) -> Iterator[list[Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            yield node["enum"]
        for value in node.values():
            yield from _enums(value)
    elif isinstance(node, list):
        for item in node:
            yield from _enums(item)


def test_budget_used_counts_time_and_trial_rows(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    engine = app.extensions["baobab"].engine
    job = _job(app, client, developer, n=2, budget={"TIME_HOURS": 0.5, "MODEL_TRIAL_COUNT": 3, "GPU_COUNT": 0})
    assert job["budget_used"] == {"time_s": 0.0, "time_limit_s": 1800.0, "trials": 0, "trial_limit": 6}
    for sub in job["sub_jobs"]:
        add_trial(engine, sub["id"], 0, TrialState.COMPLETED, 0.5)
    add_trial(engine, job["sub_jobs"][0]["id"], 1, TrialState.ERRORED)
    with session_scope(engine) as session:
        session.execute(
            update(TrainJob)
            .where(TrainJob.id == job["id"])
            .values(started_at=T0, finished_at=T0 + timedelta(minutes=12, seconds=3))
        )
    shown = client.get("/api/v1/train_jobs/fraud/1", headers=developer[1]).json
    assert shown["budget_used"] == {"time_s": 723.0, "time_limit_s": 1800.0, "trials": 3, "trial_limit": 6}
    listed = client.get("/api/v1/train_jobs", headers=developer[1]).json["train_jobs"]
    assert listed[0]["budget_used"] == shown["budget_used"]

    only_time = _job(app, client, developer, app="timed", budget={"TIME_HOURS": 1})
    assert only_time["budget_used"]["trial_limit"] is None


def test_stop_one_trial(app: Flask, client: FlaskClient, add_user: AddUser) -> None:
    engine = app.extensions["baobab"].engine
    owner = add_user(UserRole.APP_DEVELOPER)
    _, stranger = add_user(UserRole.APP_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)
    job = _job(app, client, owner)
    sub = job["sub_jobs"][0]["id"]
    running = add_trial(engine, sub, 0, TrialState.RUNNING)
    pending = add_trial(engine, sub, 1, TrialState.PENDING)
    done = add_trial(engine, sub, 2, TrialState.COMPLETED, 0.5)
    events = app.extensions["baobab"].events.subscribe(EventKind.TRIAL_STOP_REQUESTED)

    response = client.post(f"/api/v1/trials/{running}/stop", headers=owner[1])
    assert response.status_code == 202, response.json
    assert response.json["id"] == running and response.json["status"] == "RUNNING"  # the driver stops it
    assert events.get(timeout=5) == Event(EventKind.TRIAL_STOP_REQUESTED, running)
    assert client.post(f"/api/v1/trials/{pending}/stop", headers=admin).status_code == 202
    assert events.get(timeout=5) == Event(EventKind.TRIAL_STOP_REQUESTED, pending)

    finished = client.post(f"/api/v1/trials/{done}/stop", headers=owner[1])
    assert finished.status_code == 409
    assert finished.json["error"]["message"] == (
        f"trial {done} is COMPLETED already; only a PENDING or RUNNING trial can be stopped"
    )
    for trial_id, headers in [(running, stranger), (10**6, owner[1]), (2**64, owner[1])]:
        missing = client.post(f"/api/v1/trials/{trial_id}/stop", headers=headers)
        assert missing.status_code == 404
        assert missing.json["error"]["message"] == f"no trial with id {trial_id}"
    assert events.get(timeout=0.05) is None  # refused stops announce nothing
    with session_scope(engine) as session:
        assert session.get(Trial, running).status is TrialState.RUNNING
        assert session.get(SubJob, sub) is not None
