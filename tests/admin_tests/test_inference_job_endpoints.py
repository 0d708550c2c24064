"""``/api/v1/inference_jobs``: members from trained trials, a key shown once, events after commit, owners only."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from baobab import Settings
from baobab.admin import create_app
from baobab.model import FloatKnob, Task, knob_config_to_json
from baobab.store import (
    Event,
    EventKind,
    InferenceJob,
    InferenceJobStatus,
    InferenceMember,
    InferenceRevision,
    InferenceVersion,
    JobStatus,
    LocalEventChannel,
    ModelAccess,
    ModelTemplate,
    SubJob,
    Subscription,
    TrainJob,
    Trial,
    TrialState,
    UserRole,
    create_engine_from_url,
    params_from_bytes,
    params_to_bytes,
    request_log_part_key,
    session_scope,
)

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
TrialSpec = tuple[str, TrialState, float | None, bool]  # model name, state, score, has parameters

URL = "/api/v1/inference_jobs"
RATE = "request_log_rate"
CSV = b"x1,x2,label\n1.0,2.0,0\n3.0,4.0,1\n"
KNOB_CONFIG = knob_config_to_json({"lr": FloatKnob(1e-3, 1.0, is_exp=True)})

# "shop" version 1, in trial-number order: the best two are 5 (0.95) and 0 (0.90); 4 is STOPPED but counts;
# 2, 3 and 7 never finished well; 6 finished but kept no parameters.
SHOP_V1: list[TrialSpec] = [
    ("linear", TrialState.COMPLETED, 0.90, True),
    ("linear", TrialState.COMPLETED, 0.70, True),
    ("linear", TrialState.ERRORED, None, False),
    ("linear", TrialState.RUNNING, None, False),
    ("linear", TrialState.STOPPED, 0.80, True),
    ("forest", TrialState.COMPLETED, 0.95, True),
    ("forest", TrialState.COMPLETED, 0.60, False),
    ("forest", TrialState.CANCELLED, None, False),
]


def member_ids(session: Session, job_id: int | None = None) -> list[int]:
    """The trial ids the versions of inference job ``job_id`` (of every job when None) hold."""
    query = (
        select(InferenceMember.trial_id)
        .join(InferenceVersion, InferenceVersion.id == InferenceMember.version_id)
        .join(InferenceRevision, InferenceRevision.id == InferenceVersion.revision_id)
    )
    if job_id is not None:
        query = query.where(InferenceRevision.inference_job_id == job_id)
    return list(session.scalars(query))


class ProbedChannel(LocalEventChannel):
    """Reads the inference job on a connection of its own as each event is published: what a
    listener in another process would find then (status, number of members)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine
        self.seen: dict[Event, tuple[InferenceJobStatus | None, int]] = {}

    def publish(self, event: Event) -> None:
        with session_scope(self.engine) as session:
            job = session.get(InferenceJob, event.id)
            self.seen[event] = (job.status if job is not None else None, len(member_ids(session, event.id)))
        super().publish(event)


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    """The app of the shared fixtures, publishing on a :class:`ProbedChannel`."""
    probe_engine = create_engine_from_url(settings.database_url)
    app = create_app(settings, ProbedChannel(probe_engine))
    yield app
    app.extensions["baobab"].engine.dispose()
    probe_engine.dispose()


@dataclass
class World:
    """Who owns what: alice (MODEL_DEVELOPER) "shop" v1, v2 and "idle" v1; bob (APP_DEVELOPER) "zoo" v1."""

    app: Flask
    client: FlaskClient
    events: Subscription
    alice: Headers
    alice_id: int
    bob: Headers
    bob_id: int
    admin: Headers
    root: Headers
    shop: list[int]  # trial ids of shop v1, in SHOP_V1 order
    shop_v2: list[int]
    idle: list[int]
    zoo: list[int]

    def create(self, headers: Headers, **body: Any) -> Any:
        return self.client.post(URL, json=body, headers=headers)

    def next_event(self) -> Event | None:
        """The next event, checked to announce a change that was already committed when it was published."""
        event = self.events.get(timeout=0.01)
        if event is not None:
            status, members = self.app.extensions["baobab"].events.seen[event]
            if event.kind is EventKind.INFERENCE_CREATED:
                assert (status, members > 0) == (InferenceJobStatus.STARTING, True), (event, status, members)
            else:
                assert status is InferenceJobStatus.STOPPED, (event, status)
        return event


def upload_dataset(client: FlaskClient, headers: Headers) -> int:
    data = {"name": "tiny", "format": "TABULAR", "target": "label", "file": (io.BytesIO(CSV), "tiny.csv")}
    response = client.post("/api/v1/datasets", data=data, headers=headers, content_type="multipart/form-data")
    assert response.status_code == 201, response.json
    return response.json["id"]


def add_train_job(
    app: Flask, owner_id: int, dataset_id: int, name: str, version: int, trials: list[TrialSpec]
) -> list[int]:
    """Writes a train job with one sub-job per model and ``trials``; returns the trial ids in order.

    A trial with parameters gets a real safetensors artifact at ``params/trial-<id>.safetensors``.
    """
    state = app.extensions["baobab"]
    start = datetime.now(UTC) - timedelta(minutes=5)
    with session_scope(state.engine) as session:
        job = TrainJob(
            owner_id=owner_id, app=name, app_version=version, task=Task.TABULAR_CLASSIFICATION,
            train_dataset_id=dataset_id, val_dataset_id=dataset_id, budget={"MODEL_TRIAL_COUNT": 8},
            status=JobStatus.RUNNING, started_at=start,
        )  # fmt: skip
        sub_jobs: dict[str, SubJob] = {}
        rows: list[tuple[Trial, bool]] = []
        for number, (model, status, score, has_params) in enumerate(trials):
            if model not in sub_jobs:
                template = ModelTemplate(
                    owner_id=owner_id, name=model, task=Task.TABULAR_CLASSIFICATION, class_name=model.title(),
                    artifact_path=f"templates/{model}.py", checksum="0" * 64, access=ModelAccess.PRIVATE,
                    knob_config=KNOB_CONFIG,
                )  # fmt: skip
                sub_jobs[model] = SubJob(train_job=job, model_template=template, strategy="random", seed=number)
            finished = status.is_finished()
            trial = Trial(
                sub_job=sub_jobs[model], number=number, knobs={"lr": 0.1}, policies={}, status=status, score=score,
                started_at=start, finished_at=start + timedelta(seconds=number + 1) if finished else None,
                attempts=1, error="boom" if status is TrialState.ERRORED else None,
            )  # fmt: skip
            rows.append((trial, has_params))
        session.add(job)
        session.flush()
        for trial, has_params in rows:
            if has_params:
                key = f"params/trial-{trial.id}.safetensors"
                state.artifacts.put_bytes(key, params_to_bytes({"w": np.full(3, trial.id, np.float32), "bias": 0.5}))
                trial.params_path = key
        return [trial.id for trial, _ in rows]


@pytest.fixture
def world(app: Flask, client: FlaskClient, add_user: AddUser, root: Headers) -> Iterator[World]:
    alice_user, alice = add_user(UserRole.MODEL_DEVELOPER)
    bob_user, bob = add_user(UserRole.APP_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)
    alice_data, bob_data = upload_dataset(client, alice), upload_dataset(client, bob)
    events = app.extensions["baobab"].events.subscribe(EventKind.INFERENCE_CREATED, EventKind.INFERENCE_STOPPED)
    alice_id, bob_id = alice_user["id"], bob_user["id"]
    yield World(
        app=app, client=client, events=events,
        alice=alice, alice_id=alice_id, bob=bob, bob_id=bob_id, admin=admin, root=root,
        shop=add_train_job(app, alice_id, alice_data, "shop", 1, SHOP_V1),
        shop_v2=add_train_job(app, alice_id, alice_data, "shop", 2, [("linear", TrialState.COMPLETED, 0.5, True)]),
        idle=add_train_job(app, alice_id, alice_data, "idle", 1,
                           [("linear", TrialState.RUNNING, None, False), ("linear", TrialState.ERRORED, None, False)]),
        zoo=add_train_job(app, bob_id, bob_data, "zoo", 1, [("net", TrialState.COMPLETED, 0.99, True)]),
    )  # fmt: skip
    events.close()


def member(trial_id: int, model_name: str, score: float) -> dict[str, Any]:
    return {"trial_id": trial_id, "model_name": model_name, "score": score}


def test_create_with_k_or_trial_ids_then_get_and_list(world: World) -> None:
    w, shop = world, world.shop
    # The store holds what the trials wrote: real parameter files.
    with session_scope(w.app.extensions["baobab"].engine) as session:
        path = session.get(Trial, shop[0]).params_path
    assert params_from_bytes(w.app.extensions["baobab"].artifacts.get_bytes(path))["bias"] == 0.5

    best_two = w.create(w.alice, app="shop", app_version=1)  # k defaults to 2
    assert best_two.status_code == 201, best_two.json
    body = dict(best_two.json)
    api_key = body.pop("api_key")
    created_at = body.pop("created_at")
    assert datetime.fromisoformat(created_at).tzinfo is not None
    assert body == {
        "id": body["id"], "app": "shop", "app_version": 1, "train_job_id": body["train_job_id"],
        "status": "STARTING", "public": False, "predictor_url": None, "error": None, "owner_id": w.alice_id,
        "stopped_at": None, "members": [member(shop[5], "forest", 0.95), member(shop[0], "linear", 0.90)],
        "request_log_rate": 0.0,
        "revision": 1, "served_revision": None,
        "versions": [{"name": "v1", "weight": 1.0, "trial_ids": [shop[5], shop[0]]}],
    }  # fmt: skip
    assert w.next_event() == Event(EventKind.INFERENCE_CREATED, body["id"])
    assert w.next_event() is None

    # Only the key's SHA-256 is kept; the key itself is nowhere in the row.
    assert isinstance(api_key, str) and len(api_key) >= 43
    with session_scope(w.app.extensions["baobab"].engine) as session:
        row = session.get(InferenceJob, body["id"])
        assert row.api_key_hash == hashlib.sha256(api_key.encode()).hexdigest()
        assert api_key not in repr([getattr(row, c.key) for c in InferenceJob.__table__.columns])
        assert sorted(member_ids(session, row.id)) == sorted([shop[5], shop[0]])
        train_job_id = session.scalars(select(TrainJob.id).where(TrainJob.app == "shop", TrainJob.app_version == 1))
        assert body["train_job_id"] == train_job_id.one()

    # k=20 serves every COMPLETED trial with parameters, best first; the STOPPED one (cut off
    # mid-training) only when asked for.
    completed = w.create(w.alice, app="shop", app_version=1, k=20)
    assert completed.status_code == 201, completed.json
    assert completed.json["members"] == [
        member(shop[5], "forest", 0.95), member(shop[0], "linear", 0.90), member(shop[1], "linear", 0.70),
    ]  # fmt: skip
    everything = w.create(w.alice, app="shop", app_version=1, k=20, public=True, include_stopped=True)
    assert everything.status_code == 201, everything.json
    assert everything.json["public"] is True
    assert everything.json["members"] == [
        member(shop[5], "forest", 0.95), member(shop[0], "linear", 0.90),
        member(shop[4], "linear", 0.80), member(shop[1], "linear", 0.70),
    ]  # fmt: skip

    chosen = w.create(w.alice, app="shop", app_version=1, trial_ids=[shop[1], shop[4]], k=None)
    assert chosen.status_code == 201, chosen.json
    assert chosen.json["members"] == [member(shop[4], "linear", 0.80), member(shop[1], "linear", 0.70)]

    latest = w.create(w.alice, app="shop", app_version=None)  # no version: the latest one
    assert latest.status_code == 201, latest.json
    assert (latest.json["app_version"], latest.json["members"]) == (2, [member(w.shop_v2[0], "linear", 0.5)])

    created = [best_two.json, completed.json, everything.json, chosen.json, latest.json]
    assert len({answer["api_key"] for answer in created}) == 5
    assert [w.next_event() for _ in created[1:]] == [Event(EventKind.INFERENCE_CREATED, a["id"]) for a in created[1:]]

    # The key is shown once: never by get or list.
    for answer in created:
        got = w.client.get(f"{URL}/{answer['id']}", headers=w.alice)
        assert got.status_code == 200, got.json
        assert got.json == {k: v for k, v in answer.items() if k != "api_key"}
    listed = w.client.get(URL, headers=w.alice)
    assert listed.status_code == 200
    assert listed.json == {"inference_jobs": [w.client.get(f"{URL}/{a['id']}", headers=w.alice).json
                                              for a in reversed(created)]}  # fmt: skip
    assert "api_key" not in listed.get_data(as_text=True)
    assert [j["id"] for j in w.client.get(f"{URL}?app=shop", headers=w.alice).json["inference_jobs"]] == [
        a["id"] for a in reversed(created)
    ]
    assert w.client.get(f"{URL}?app=zoo", headers=w.alice).json == {"inference_jobs": []}
    assert w.client.get(f"{URL}?app=nothing", headers=w.root).json == {"inference_jobs": []}
    assert w.next_event() is None  # reading announces nothing


def test_bad_requests_name_the_field_and_write_nothing(world: World) -> None:
    w, shop = world, world.shop
    ok = {"app": "shop", "app_version": 1}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({**ok, "name": "x"}, "name", r"unknown field 'name'; known fields: app, app_version, owner_id, k, "),
        ({"app_version": 1}, "app", r"'app' is required"),
        ({"app": 7}, "app", r"'app' must be a string, got a number"),
        ({"app": "  "}, "app", r"'app' must not be blank"),
        ({**ok, "app_version": "1"}, "app_version", r"'app_version' must be an integer, got '1'"),
        ({**ok, "app_version": 1.0}, "app_version", r"'app_version' must be an integer, got 1.0"),
        ({**ok, "app_version": True}, "app_version", r"'app_version' must be an integer, got True"),
        ({**ok, "app_version": 0}, "app_version", r"'app_version' is 0; it must be at least 1"),
        ({**ok, "public": "yes"}, "public", r"'public' must be true or false, got 'yes'"),
        ({**ok, "public": 1}, "public", r"'public' must be true or false, got 1"),
        ({**ok, "k": "2"}, "k", r"'k' must be an integer, got '2'"),
        ({**ok, "k": 2.5}, "k", r"'k' must be an integer, got 2.5"),
        ({**ok, "k": False}, "k", r"'k' must be an integer, got False"),
        ({**ok, "k": 0}, "k", r"'k' is 0; it must be between 1 and 20"),
        ({**ok, "k": 21}, "k", r"'k' is 21; it must be between 1 and 20"),
        ({**ok, "k": -1}, "k", r"'k' is -1; it must be between 1 and 20"),
        ({**ok, "k": 1, "trial_ids": [shop[0]]}, "trial_ids", r"give either 'k' .* or 'trial_ids', not both"),
        ({**ok, "trial_ids": []}, "trial_ids", r"'trial_ids' must be a non-empty array of trial ids, got \[\]"),
        ({**ok, "trial_ids": shop[0]}, "trial_ids", r"'trial_ids' must be a non-empty array"),
        ({**ok, "trial_ids": {"0": shop[0]}}, "trial_ids", r"'trial_ids' must be a non-empty array"),
        ({**ok, "trial_ids": list(range(1, 22))}, "trial_ids", r"'trial_ids' has 21 ids, at most 20 are allowed"),
        ({**ok, "trial_ids": [shop[0], "1"]}, "trial_ids[1]", r"trial_ids\[1\] must be an integer trial id, got '1'"),
        ({**ok, "trial_ids": [1.0]}, "trial_ids[0]", r"trial_ids\[0\] must be an integer trial id, got 1.0"),
        ({**ok, "trial_ids": [True]}, "trial_ids[0]", r"trial_ids\[0\] must be an integer trial id, got True"),
        ({**ok, "trial_ids": [None]}, "trial_ids[0]", r"trial_ids\[0\] must be an integer trial id, got None"),
        ({**ok, "trial_ids": [shop[0], shop[1], shop[0]]}, "trial_ids[2]",
         rf"trial_ids\[2\]: trial {shop[0]} is already trial_ids\[0\]"),
        # Members must be trained trials of this very job.
        ({**ok, "trial_ids": [shop[0], w.zoo[0]]}, "trial_ids[1]",
         rf"trial_ids\[1\]: train job 'shop' version 1 has no trial with id {w.zoo[0]}$"),
        ({**ok, "trial_ids": [w.shop_v2[0]]}, "trial_ids[0]", rf"version 1 has no trial with id {w.shop_v2[0]}$"),
        ({"app": "shop", "trial_ids": [shop[0]]}, "trial_ids[0]", rf"version 2 has no trial with id {shop[0]}$"),
        ({**ok, "trial_ids": [99_999]}, "trial_ids[0]", r"has no trial with id 99999$"),
        ({**ok, "trial_ids": [2**70]}, "trial_ids[0]", rf"there is no trial with id {2**70}$"),
        ({**ok, "trial_ids": [0]}, "trial_ids[0]", r"there is no trial with id 0$"),
        ({**ok, "trial_ids": [shop[2]]}, "trial_ids[0]", rf"trial {shop[2]} is ERRORED; only COMPLETED or STOPPED"),
        ({**ok, "trial_ids": [shop[0], shop[3]]}, "trial_ids[1]", rf"trial {shop[3]} is RUNNING; only COMPLETED"),
        ({**ok, "trial_ids": [shop[7]]}, "trial_ids[0]", rf"trial {shop[7]} is CANCELLED; only COMPLETED"),
        ({**ok, "trial_ids": [shop[6]]}, "trial_ids[0]",
         rf"trial {shop[6]} is COMPLETED but stored no parameters, so it cannot be served"),
        ({**ok, RATE: -0.1}, RATE, r"'request_log_rate' is -0.1; it must be between 0 and 1"),
        ({**ok, RATE: 1.5}, RATE, r"'request_log_rate' is 1.5; it must be between 0 and 1"),
        ({**ok, RATE: 2}, RATE, r"'request_log_rate' is 2; it must be between 0 and 1"),
        ({**ok, RATE: "0.5"}, RATE, r"'request_log_rate' must be a number, got '0.5'"),
        ({**ok, RATE: True}, RATE, r"'request_log_rate' must be a number, got True"),
        ({**ok, RATE: [0.5]}, RATE, r"'request_log_rate' must be a number, got \[0.5\]"),
        ({**ok, RATE: {"rate": 1}}, RATE, r"'request_log_rate' must be a number"),
    ]  # fmt: skip
    for body, field, message in cases:
        response = w.create(w.alice, **body)
        assert response.status_code == 400, (body, response.json)
        error = response.json["error"]
        assert (error["code"], error["field"]) == ("bad_request", field), (body, error)
        assert re.search(message, error["message"]), (body, error["message"])

    for number in ("NaN", "-Infinity", "1e999"):  # not numbers JSON holds
        raw = f'{{"app": "shop", "request_log_rate": {number}}}'
        response = w.client.post(URL, data=raw, content_type="application/json", headers=w.alice)
        assert (response.status_code, response.json["error"]["field"]) == (400, RATE), (raw, response.json)
        assert "numbers must be finite" in response.json["error"]["message"]

    for raw, content_type in [("not json", "application/json"), ('{"app": "shop"}', "text/plain"), ("[1]", None)]:
        response = w.client.post(URL, data=raw, content_type=content_type or "application/json", headers=w.alice)
        assert response.status_code == 400, (raw, response.json)
        assert re.search("must be a JSON object|is not valid JSON", response.json["error"]["message"])

    # The body's bounds are declared once: just past each bound the document shows, the API refuses the field,
    # and at the bound it takes it (and then answers what the rest earns: "idle" has nothing to serve, a 409).
    document = w.client.get("/api/v1/openapi.json").json
    schema = document["paths"][URL]["post"]["requestBody"]["content"]["application/json"]["schema"]
    bounded = {
        name: branch
        for name, field in schema["properties"].items()
        for branch in field.get("anyOf", [field])
        if "minimum" in branch or "maximum" in branch
    }
    assert set(bounded) == {"app_version", "owner_id", "k", RATE}
    for name, branch in bounded.items():
        step = 1 if branch["type"] == "integer" else 0.25
        for edge, outside in (("minimum", -step), ("maximum", step)):
            if edge not in branch or name in ("app_version", "owner_id"):  # these name rows: at a bound, a 404
                continue
            refused = w.create(w.alice, app="idle", **{name: branch[edge] + outside})
            assert (refused.status_code, refused.json["error"]["field"]) == (400, name), (name, refused.json)
            taken = w.create(w.alice, app="idle", **{name: branch[edge]})
            assert taken.status_code == 409, (name, taken.json)
        if name in ("app_version", "owner_id"):
            refused = w.create(w.alice, app="idle", **{name: branch["minimum"] - 1})
            assert (refused.status_code, refused.json["error"]["field"]) == (400, name), (name, refused.json)

    for body in [
        {"app": "nope"},
        {"app": "shop", "app_version": 3},
        {"app": "shop", "app_version": 2**70},
        {"app": "zoo"},
        {"app": "zoo", "k": 1},
    ]:
        response = w.create(w.alice, **body)
        assert (response.status_code, response.json["error"]["code"]) == (404, "not_found"), (body, response.json)

    # A job with nothing trained yet: 409, whichever way the members are asked for.
    for body in [{"app": "idle"}, {"app": "idle", "k": 3}, {"app": "idle", "trial_ids": w.idle}]:
        response = w.create(w.alice, **body)
        assert response.status_code == 409, (body, response.json)
        assert response.json["error"]["code"] == "conflict"
        assert re.search(r"^train job 'idle' version 1 has no trained trials yet", response.json["error"]["message"])

    with session_scope(w.app.extensions["baobab"].engine) as session:
        assert session.scalar(select(func.count()).select_from(InferenceJob)) == 0
        assert member_ids(session) == []
    assert w.next_event() is None


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.STOPPED, JobStatus.ERRORED])
def test_a_finished_job_with_nothing_to_serve_says_so_rather_than_wait(world: World, status: JobStatus) -> None:
    with session_scope(world.app.extensions["baobab"].engine) as session:
        session.scalars(select(TrainJob).where(TrainJob.app == "idle")).one().status = status
    for body in [{"app": "idle"}, {"app": "idle", "k": 3}, {"app": "idle", "trial_ids": world.idle}]:
        response = world.create(world.alice, **body)
        assert response.status_code == 409, (body, response.json)
        message = response.json["error"]["message"]
        assert message.startswith(f"train job 'idle' version 1 is {status.value} and has no trained trial to serve")
        assert "wait" not in message


def test_a_job_with_only_stopped_trials_serves_them_only_when_asked(world: World) -> None:
    # "cut": its one trained trial was STOPPED mid-training (at the deadline, or by early stopping).
    w = world
    dataset = upload_dataset(w.client, w.alice)
    (cut,) = add_train_job(w.app, w.alice_id, dataset, "cut", 1, [("linear", TrialState.STOPPED, 0.8, True)])
    refused = w.create(w.alice, app="cut")
    assert refused.status_code == 409, refused.json
    assert refused.json["error"] == {
        "code": "conflict",
        "message": "train job 'cut' version 1 has no COMPLETED trial to serve, only trials STOPPED mid-training (at "
        "its deadline, or by early stopping); serve them with include_stopped=true",
        "field": "include_stopped",
    }
    asked = w.create(w.alice, app="cut", include_stopped=True)
    assert asked.status_code == 201, asked.json
    assert asked.json["members"] == [member(cut, "linear", 0.8)]
    named = w.create(w.alice, app="cut", trial_ids=[cut])  # a trial named by id is asked for
    assert named.status_code == 201, named.json
    bad = w.create(w.alice, app="cut", include_stopped="yes")
    assert (bad.status_code, bad.json["error"]["field"]) == (400, "include_stopped")


def test_stop_is_written_then_announced_once(world: World) -> None:
    w = world
    job = w.create(w.alice, app="shop", app_version=1, k=1).json
    assert w.next_event() == Event(EventKind.INFERENCE_CREATED, job["id"])

    before = datetime.now(UTC)
    stopped = w.client.post(f"{URL}/{job['id']}/stop", headers=w.alice)
    assert stopped.status_code == 200, stopped.json
    assert stopped.json["status"] == "STOPPED"
    assert before <= datetime.fromisoformat(stopped.json["stopped_at"]) <= datetime.now(UTC)
    expected = {k: v for k, v in job.items() if k not in ("api_key", "status", "stopped_at")}
    assert {k: v for k, v in stopped.json.items() if k not in ("status", "stopped_at")} == expected
    assert w.next_event() == Event(EventKind.INFERENCE_STOPPED, job["id"])
    with session_scope(w.app.extensions["baobab"].engine) as session:
        assert session.get(InferenceJob, job["id"]).status is InferenceJobStatus.STOPPED  # committed before the event
    assert w.client.get(f"{URL}/{job['id']}", headers=w.alice).json == stopped.json

    again = w.client.post(f"{URL}/{job['id']}/stop", headers=w.alice)
    assert (again.status_code, again.json) == (200, stopped.json)  # unchanged, stopped_at too
    assert w.next_event() is None

    # A job whose predictor failed keeps its state and reason; stopping it announces nothing.
    failed = w.create(w.alice, app="shop", app_version=1).json
    assert w.next_event() == Event(EventKind.INFERENCE_CREATED, failed["id"])
    with session_scope(w.app.extensions["baobab"].engine) as session:
        row = session.get(InferenceJob, failed["id"])
        row.status, row.error = InferenceJobStatus.ERRORED, "member 3 failed to load"
    answer = w.client.post(f"{URL}/{failed['id']}/stop", headers=w.alice)
    assert answer.status_code == 200, answer.json
    assert (answer.json["status"], answer.json["error"], answer.json["stopped_at"]) == (
        "ERRORED", "member 3 failed to load", None
    )  # fmt: skip
    assert w.next_event() is None

    # A running one (the supervisor stored its URL) stops like a starting one.
    running = w.create(w.alice, app="shop", app_version=1).json
    with session_scope(w.app.extensions["baobab"].engine) as session:
        row = session.get(InferenceJob, running["id"])
        row.status, row.predictor_url = InferenceJobStatus.RUNNING, "http://127.0.0.1:9999"
    shown = w.client.get(f"{URL}/{running['id']}", headers=w.alice).json
    assert (shown["status"], shown["predictor_url"]) == ("RUNNING", "http://127.0.0.1:9999")
    assert w.client.post(f"{URL}/{running['id']}/stop", headers=w.alice).json["status"] == "STOPPED"
    assert [w.next_event(), w.next_event()] == [
        Event(EventKind.INFERENCE_CREATED, running["id"]), Event(EventKind.INFERENCE_STOPPED, running["id"])
    ]  # fmt: skip

    for missing_id in (99_999, 2**70):
        for missing in (w.client.post(f"{URL}/{missing_id}/stop", headers=w.root),
                        w.client.get(f"{URL}/{missing_id}", headers=w.root)):  # fmt: skip
            assert (missing.status_code, missing.json["error"]["message"]) == (
                404, f"no inference job with id {missing_id}"
            )  # fmt: skip
    assert w.client.post(f"{URL}/{job['id']}/stop").status_code == 401


def test_owners_and_admins_only(world: World) -> None:
    """Each role × each endpoint × own train job / someone else's / someone else's inference job."""
    w = world
    people = {"alice": w.alice, "bob": w.bob, "admin": w.admin, "root": w.root}
    owns = {"alice": "shop", "bob": "zoo"}  # each developer's train job; the admins own none
    admins = ("admin", "root")

    # Create: on one's own train job, or on any as an admin; someone else's answers 404 like a missing one.
    jobs: dict[int, str] = {}  # inference job id -> owner
    for name, headers in people.items():
        for app in ("shop", "zoo"):
            response = w.create(headers, app=app, k=1)
            if name in admins or owns[name] == app:
                assert response.status_code == 201, (name, app, response.json)
                jobs[response.json["id"]] = name
                assert w.next_event() == Event(EventKind.INFERENCE_CREATED, response.json["id"])
            else:
                assert response.status_code == 404, (name, app, response.json)
                assert response.json["error"]["code"] == "not_found"
    assert w.next_event() is None
    assert sorted(jobs.values()) == ["admin", "admin", "alice", "bob", "root", "root"]

    # List: one's own; admins see everyone's (an admin's job on alice's train job is not alice's).
    for name, headers in people.items():
        listed = w.client.get(URL, headers=headers)
        assert listed.status_code == 200, listed.json
        seen = [job["id"] for job in listed.json["inference_jobs"]]
        expected = [i for i, owner in jobs.items() if name in admins or owner == name]
        assert seen == sorted(expected, reverse=True), name
    shop_jobs = w.client.get(f"{URL}?app=shop", headers=w.admin).json["inference_jobs"]
    assert sorted((job["app"], jobs[job["id"]]) for job in shop_jobs) == [
        ("shop", "admin"), ("shop", "alice"), ("shop", "root")
    ]  # fmt: skip

    # Get, then stop: others' jobs answer 404 and stay as they are; then each visible one is stopped.
    for name, headers in people.items():
        for job_id, owner in jobs.items():
            visible = name in admins or owner == name
            got = w.client.get(f"{URL}/{job_id}", headers=headers)
            assert got.status_code == (200 if visible else 404), (name, owner, got.json)
            if not visible:
                assert got.json["error"]["message"] == f"no inference job with id {job_id}"
                refused = w.client.post(f"{URL}/{job_id}/stop", headers=headers)
                assert (refused.status_code, refused.json["error"]["code"]) == (404, "not_found")
    assert w.next_event() is None
    with session_scope(w.app.extensions["baobab"].engine) as session:
        assert set(session.scalars(select(InferenceJob.status))) == {InferenceJobStatus.STARTING}

    for job_id, owner in jobs.items():
        stopper = people[owner] if owner not in admins else w.admin  # an admin stops another admin's job
        stopped = w.client.post(f"{URL}/{job_id}/stop", headers=stopper)
        assert (stopped.status_code, stopped.json["status"]) == (200, "STOPPED"), (owner, stopped.json)
        assert w.next_event() == Event(EventKind.INFERENCE_STOPPED, job_id)
    assert w.client.post(f"{URL}/{min(jobs)}/stop", headers=w.bob).status_code == 404

    # No token, no answer.
    one = min(jobs)
    for method, path in [("post", URL), ("get", URL), ("get", f"{URL}/{one}"), ("post", f"{URL}/{one}/stop")]:
        response = getattr(w.client, method)(path, json={"app": "shop"} if method == "post" else None)
        assert response.status_code == 401, (method, path)
    assert w.next_event() is None


def _write_parts(app: Flask, job_id: int, parts: dict[tuple[date, str], bytes]) -> None:
    """Request log parts as a predictor writes them: (day, name) -> JSON lines."""
    for (day, name), data in parts.items():
        app.extensions["baobab"].artifacts.put_bytes(request_log_part_key(job_id, day, name), data)


def test_request_logs_are_listed_and_sent_as_a_file_a_day_to_owners_and_admins_only(world: World) -> None:
    w = world
    job = w.create(w.alice, app="shop", app_version=1, k=1, request_log_rate=0.25).json
    assert job["request_log_rate"] == 0.25
    assert w.client.get(f"{URL}/{job['id']}", headers=w.alice).json["request_log_rate"] == 0.25
    logs = f"{URL}/{job['id']}/request_logs"
    assert w.client.get(logs, headers=w.alice).json == {"request_logs": []}  # nothing logged yet

    first, second = date(2026, 4, 1), date(2026, 4, 2)
    parts = {
        (first, "230000000000-bbbbbbbb-000002"): b'{"n": 3}\n',
        (first, "120000000000-aaaaaaaa-000001"): b'{"n": 1}\n{"n": 2}\n',
        (second, "000001000000-aaaaaaaa-000003"): b'{"n": 4}\n',
    }
    _write_parts(w.app, job["id"], parts)
    listed = w.client.get(logs, headers=w.alice)
    assert listed.status_code == 200, listed.json
    assert listed.json == {
        "request_logs": [
            {"day": "2026-04-02", "name": f"inference-{job['id']}-2026-04-02.jsonl", "size_bytes": 9},
            {"day": "2026-04-01", "name": f"inference-{job['id']}-2026-04-01.jsonl", "size_bytes": 27},
        ]
    }
    sent = w.client.get(f"{logs}/2026-04-01", headers=w.alice)
    assert sent.status_code == 200
    assert sent.get_data() == b'{"n": 1}\n{"n": 2}\n{"n": 3}\n'  # the day's parts, joined in time order
    assert sent.mimetype == "application/x-ndjson"
    assert sent.headers["Content-Disposition"] == f"attachment; filename=inference-{job['id']}-2026-04-01.jsonl"

    for day in ("yesterday", "2026-4-1", "2026-02-30", "2026-04-01.jsonl", "20260401"):
        bad = w.client.get(f"{logs}/{day}", headers=w.alice)
        assert (bad.status_code, bad.json["error"]["field"]) == (400, "day"), (day, bad.json)
        assert (
            bad.json["error"]["message"] == f"day {day!r} is not a date YYYY-MM-DD (a UTC day, as the listing gives it)"
        )
    empty_day = w.client.get(f"{logs}/2026-04-03", headers=w.alice)
    assert (empty_day.status_code, empty_day.json["error"]["message"]) == (
        404, f"inference job {job['id']} logged no requests on 2026-04-03 (UTC)"
    )  # fmt: skip

    # Someone else's job is not there for bob; the admins read it; nobody reads without a token.
    for path in (logs, f"{logs}/2026-04-01"):
        refused = w.client.get(path, headers=w.bob)
        assert (refused.status_code, refused.json["error"]["message"]) == (404, f"no inference job with id {job['id']}")
        for admin in (w.admin, w.root):
            assert w.client.get(path, headers=admin).status_code == 200
        assert w.client.get(path).status_code == 401
    for missing_id in (99_999, 2**70):
        missing = w.client.get(f"{URL}/{missing_id}/request_logs", headers=w.root)
        assert (missing.status_code, missing.json["error"]["message"]) == (
            404,
            f"no inference job with id {missing_id}",
        )
    assert w.client.get(f"{logs}?day=2026-04-01", headers=w.alice).status_code == 400  # no query arguments


def test_a_finished_job_is_deleted_with_its_logs_a_live_one_is_not(world: World) -> None:
    w = world
    engine = w.app.extensions["baobab"].engine
    kept = w.create(w.alice, app="shop", app_version=1, k=1, request_log_rate=1).json
    job = w.create(w.alice, app="shop", app_version=1, k=2, request_log_rate=1).json
    failed = w.create(w.alice, app="shop", app_version=1, k=1).json
    for logged in (kept, job):
        _write_parts(w.app, logged["id"], {(date(2026, 4, 1), "120000000000-aaaaaaaa-000001"): b'{"n": 1}\n'})
    assert [w.next_event() for _ in range(3)] == [
        Event(EventKind.INFERENCE_CREATED, j["id"]) for j in (kept, job, failed)
    ]

    # STARTING, then RUNNING: refused, and nothing is lost.
    for status in (InferenceJobStatus.STARTING, InferenceJobStatus.RUNNING):
        with session_scope(engine) as session:
            session.get(InferenceJob, job["id"]).status = status
        refused = w.client.delete(f"{URL}/{job['id']}", headers=w.alice)
        assert refused.status_code == 409, refused.json
        assert refused.json["error"]["message"] == (
            f"inference job {job['id']} is {status.value}; stop it first (POST /api/v1/inference_jobs/{job['id']}/stop)"
        )
    assert len(w.client.get(f"{URL}/{job['id']}/request_logs", headers=w.alice).json["request_logs"]) == 1

    # Someone else's: not there. Stopped, the owner's: gone, with its members and logs; others' logs stay.
    assert w.client.post(f"{URL}/{job['id']}/stop", headers=w.alice).status_code == 200
    assert w.next_event() == Event(EventKind.INFERENCE_STOPPED, job["id"])
    assert w.client.delete(f"{URL}/{job['id']}", headers=w.bob).status_code == 404
    assert w.client.delete(f"{URL}/{job['id']}").status_code == 401
    with session_scope(engine) as session:
        versions = session.scalars(
            select(InferenceVersion.id).join(InferenceRevision).where(InferenceRevision.inference_job_id == job["id"])
        ).all()
    assert versions
    deleted = w.client.delete(f"{URL}/{job['id']}", headers=w.alice)
    assert (deleted.status_code, deleted.get_data()) == (204, b"")
    assert w.next_event() is None  # nothing to announce: its predictor was stopped already
    assert w.client.get(f"{URL}/{job['id']}", headers=w.alice).status_code == 404
    assert w.client.get(f"{URL}/{job['id']}/request_logs", headers=w.alice).status_code == 404
    assert w.app.extensions["baobab"].artifacts.files(f"request_logs/inference-{job['id']}") == {}
    with session_scope(engine) as session:
        where = InferenceMember.version_id.in_(versions)
        assert session.scalar(select(func.count()).select_from(InferenceMember).where(where)) == 0
        gone = InferenceRevision.inference_job_id == job["id"]
        assert session.scalar(select(func.count()).select_from(InferenceRevision).where(gone)) == 0
    assert len(w.client.get(f"{URL}/{kept['id']}/request_logs", headers=w.alice).json["request_logs"]) == 1
    again = w.client.delete(f"{URL}/{job['id']}", headers=w.alice)
    assert (again.status_code, again.json["error"]["message"]) == (404, f"no inference job with id {job['id']}")

    # An ERRORED job is finished too, and an admin may delete anyone's.
    with session_scope(engine) as session:
        session.get(InferenceJob, failed["id"]).status = InferenceJobStatus.ERRORED
    assert w.client.delete(f"{URL}/{failed['id']}", headers=w.admin).status_code == 204
    assert [j["id"] for j in w.client.get(URL, headers=w.alice).json["inference_jobs"]] == [kept["id"]]
