"""``/api/v1/worker/trials``: a cluster worker claims, beats, records and finishes a trial with its trial token.

These are the trial-row rules of cluster mode (claim, take-over after silence, give-up
after the last attempt, finish only by the current claim), checked through the API on
both databases, and every field sent wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select, update
from train_job_world import add_model, add_trial, job_body, upload_dataset

from baobab.store import (
    Event,
    EventKind,
    InterimMetric,
    Trial,
    TrialLog,
    TrialState,
    UserRole,
    issue_trial_token,
    session_scope,
)

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]


def _node(name: str, *inputs: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "op": "call_module", "what": "Linear", "inputs": list(inputs), "changed": False,
            "mutator": None, **fields}  # fmt: skip


def _architecture(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A record as ``MutationRecord.to_json()`` writes it."""
    return {"choices": {"deep_fc": "deeper"}, "graph_key": "k", "nodes": list(nodes)}


#: A fusion profile as a worker measures it (baobab.model.FusionProfile.to_json() with the request).
MEASURED = {"max_group": 64, "samples_per_s": {"1": 900.0, "16": 2100.5}, "best": 16, "seconds": 2.5, "reason": None}
#: A finish that would be stored.
DONE = {"attempt": 1, "status": "COMPLETED", "score": 0.5}
RECORD = _architecture(_node("x", op="placeholder", what="x"), _node("fc", "x", changed=True, mutator="deep"))


@pytest.fixture
def trial(app: Flask, client: FlaskClient, add_user: AddUser) -> int:
    """A PENDING trial of a fresh job."""
    user, headers = add_user(UserRole.MODEL_DEVELOPER)
    data = upload_dataset(client, headers)
    model = add_model(app.extensions["baobab"].engine, user["id"])
    response = client.post("/api/v1/train_jobs", json=job_body(data, data, [model]), headers=headers)
    assert response.status_code == 201, response.json
    return add_trial(app.extensions["baobab"].engine, response.json["sub_jobs"][0]["id"], 0, TrialState.PENDING)


def _token(app: Flask, trial_id: int) -> Headers:
    return {"Authorization": f"Bearer {issue_trial_token(app.extensions['baobab'].settings.signing_key(), trial_id)}"}


def _post(client: FlaskClient, app: Flask, trial_id: int, action: str, body: Any, token_for: int | None = None) -> Any:
    headers = _token(app, trial_id if token_for is None else token_for)
    return client.post(f"/api/v1/worker/trials/{trial_id}/{action}", json=body, headers=headers)


def _row(app: Flask, trial_id: int) -> Trial:
    with session_scope(app.extensions["baobab"].engine) as session:
        return session.get(Trial, trial_id)


def _go_silent(app: Flask, trial_id: int, seconds: float) -> None:
    past = datetime.now(UTC) - timedelta(seconds=seconds)
    with session_scope(app.extensions["baobab"].engine) as session:
        session.execute(update(Trial).where(Trial.id == trial_id).values(heartbeat_at=past))


def test_a_worker_claims_beats_records_and_finishes_its_trial(app: Flask, client: FlaskClient, trial: int) -> None:
    claimed = _post(client, app, trial, "claim", {"worker": "w0@a:1"})
    assert claimed.status_code == 200, claimed.json
    claim = claimed.json["claim"]
    assert claim["trial_id"] == trial and claim["attempt"] == 1 and claim["knobs"]["lr"] == 0.01
    assert claim["template_key"] and claim["train_key"] and claim["val_key"]
    assert _row(app, trial).status is TrialState.RUNNING and _row(app, trial).worker == "w0@a:1"

    # A claim answer lost on the way: the same worker asks again and gets the same claim.
    again = _post(client, app, trial, "claim", {"worker": "w0@a:1"})
    assert again.json["claim"]["attempt"] == 1
    # Another worker is refused while this one beats, with the time after which to ask again.
    other = _post(client, app, trial, "claim", {"worker": "w1@b:2"})
    assert other.json["claim"] is None and other.json["refused"]["status"] == "RUNNING"
    assert 0 < other.json["refused"]["retry_after_s"] <= app.extensions["baobab"].settings.heartbeat_timeout_s

    beat = _post(client, app, trial, "beat", {"attempt": 1})
    assert beat.json == {"current": True, "stop_reason": None}
    with session_scope(app.extensions["baobab"].engine) as session:
        session.execute(update(Trial).where(Trial.id == trial).values(stop_reason="time budget spent"))
    assert _post(client, app, trial, "beat", {"attempt": 1}).json["stop_reason"] == "time budget spent"

    now = datetime.now(UTC).isoformat()
    records = {"metrics": [{"step": 1, "metrics": {"loss": 0.5, "bad": None}, "time": now}],
               "logs": [{"line": "epoch 1", "time": now}]}  # fmt: skip
    assert _post(client, app, trial, "records", records).json == {"stored": 2}
    with session_scope(app.extensions["baobab"].engine) as session:
        assert session.scalars(select(InterimMetric.metrics).where(InterimMetric.trial_id == trial)).one() == {
            "loss": 0.5,
            "bad": None,
        }
        assert session.scalars(select(TrialLog.line).where(TrialLog.trial_id == trial)).one() == "epoch 1"

    body = {"attempt": 1, "status": "STOPPED", "score": 0.8, "params_path": "params/t.safetensors",
            "log_line": "stopped early: time budget spent"}  # fmt: skip
    assert _post(client, app, trial, "finish", body).json == {"status": "STOPPED"}
    row = _row(app, trial)
    assert row.status is TrialState.STOPPED and row.score == 0.8 and row.finished_at is not None
    # Repeated (an answer lost): the state stays, and says so; a later claim is refused for good.
    assert _post(client, app, trial, "finish", body).json == {"status": "STOPPED"}
    refused = _post(client, app, trial, "claim", {"worker": "w1@b:2"}).json["refused"]
    assert refused == {"status": "STOPPED", "reason": f"trial {trial} is STOPPED", "retry_after_s": None}


def test_a_worker_finishes_with_the_fusion_profile_it_measured(app: Flask, client: FlaskClient, trial: int) -> None:
    assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    body = {"attempt": 1, "status": "COMPLETED", "score": 0.5, "fusion_profile": {**MEASURED, "budget_s": 4.5}}
    assert _post(client, app, trial, "finish", body).json == {"status": "COMPLETED"}
    assert _row(app, trial).fusion_profile == {**MEASURED, "budget_s": 4.5}


def test_a_worker_finishes_with_where_the_trials_time_went(app: Flask, client: FlaskClient, trial: int) -> None:
    assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    spent = {"fetch": 0.25, "warm_start": 1, "train": 2.5, "store": 0.0}
    body = {"attempt": 1, "status": "ERRORED", "error": "x", "time_breakdown": spent}
    assert _post(client, app, trial, "finish", body).json == {"status": "ERRORED"}
    assert _row(app, trial).time_breakdown == spent


def test_a_worker_finishes_with_the_gpu_memory_its_trial_needed(app: Flask, client: FlaskClient, trial: int) -> None:
    assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    memory = {"peak_mb": 1_200, "total_mb": 143_155}
    body = {"attempt": 1, "status": "COMPLETED", "score": 0.5, "gpu_memory": memory}
    assert _post(client, app, trial, "finish", body).json == {"status": "COMPLETED"}
    assert _row(app, trial).gpu_memory == memory


def test_a_silent_workers_trial_is_taken_over_and_the_old_claim_can_no_longer_finish_it(
    app: Flask, client: FlaskClient, trial: int
) -> None:
    timeout = app.extensions["baobab"].settings.heartbeat_timeout_s
    assert _post(client, app, trial, "claim", {"worker": "old"}).json["claim"]["attempt"] == 1
    _go_silent(app, trial, timeout + 1)
    taken = _post(client, app, trial, "claim", {"worker": "new"}).json["claim"]
    assert taken["attempt"] == 2 and _row(app, trial).worker == "new"

    # The old worker wakes up: its beats say it lost the trial, and its outcome is not stored.
    assert _post(client, app, trial, "beat", {"attempt": 1}).json == {"current": False, "stop_reason": None}
    late = _post(client, app, trial, "finish", {"attempt": 1, "status": "COMPLETED", "score": 0.1})
    assert late.json == {"status": "RUNNING"} and _row(app, trial).score is None
    assert _post(client, app, trial, "finish", {"attempt": 2, "status": "COMPLETED", "score": 0.9}).json == {
        "status": "COMPLETED"
    }
    assert _row(app, trial).score == 0.9


def test_a_fused_groups_member_is_not_taken_over(app: Flask, client: FlaskClient, trial: int) -> None:
    """A group asks for no take-over: the job driver requeues a silent member alone instead."""
    timeout = app.extensions["baobab"].settings.heartbeat_timeout_s
    assert _post(client, app, trial, "claim", {"worker": "old"}).json["claim"]["attempt"] == 1
    _go_silent(app, trial, timeout + 1)
    refused = _post(client, app, trial, "claim", {"worker": "group", "take_over": False}).json["refused"]
    assert refused == {"status": "RUNNING", "reason": f"trial {trial} is RUNNING", "retry_after_s": None}
    assert _row(app, trial).worker == "old"
    assert _post(client, app, trial, "claim", {"worker": "alone"}).json["claim"]["attempt"] == 2


def test_a_trial_silent_on_its_last_attempt_ends_errored_saying_so(app: Flask, client: FlaskClient, trial: int) -> None:
    timeout = app.extensions["baobab"].settings.heartbeat_timeout_s
    for attempt in (1, 2, 3):
        assert _post(client, app, trial, "claim", {"worker": f"w{attempt}"}).json["claim"]["attempt"] == attempt
        _go_silent(app, trial, timeout + 1)
    refused = _post(client, app, trial, "claim", {"worker": "w4"}).json["refused"]
    assert refused["status"] == "ERRORED"
    row = _row(app, trial)
    assert row.status is TrialState.ERRORED and "went silent" in row.error and "3 attempts" in row.error


def test_a_worker_ends_its_trial_invalid_with_the_templates_message(
    app: Flask, client: FlaskClient, trial: int
) -> None:
    events = app.extensions["baobab"].events.subscribe(EventKind.TRIAL_FINISHED)
    assert _post(client, app, trial, "claim", {"worker": "w"}).json["claim"]["attempt"] == 1
    error = "train() raised InvalidArchitectureError: a 3x3 feature map cannot take a 5x5 kernel"
    body = {"attempt": 1, "status": "INVALID", "error": error, "traceback": "Traceback ..."}
    assert _post(client, app, trial, "finish", body).json == {"status": "INVALID"}
    assert events.get(timeout=5) == Event(EventKind.TRIAL_FINISHED, trial)
    row = _row(app, trial)
    assert (row.status, row.score, row.error, row.traceback) == (TrialState.INVALID, None, error, "Traceback ...")
    refused = _post(client, app, trial, "claim", {"worker": "w2"}).json["refused"]
    assert refused["status"] == "INVALID" and refused["retry_after_s"] is None


@pytest.mark.parametrize(
    ("header", "status", "message"),
    [
        (None, 401, "missing trial token"),
        ("Bearer forged.token.here", 401, "invalid trial token"),
        ("Basic abc", 401, "missing trial token"),
    ],
)
def test_worker_endpoints_need_the_trials_own_token(
    app: Flask, client: FlaskClient, trial: int, header: str | None, status: int, message: str
) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = client.post(f"/api/v1/worker/trials/{trial}/claim", json={"worker": "w"}, headers=headers)
    assert response.status_code == status and message in response.json["error"]["message"]
    assert _row(app, trial).status is TrialState.PENDING  # nothing changed


def test_a_token_opens_its_own_trial_only_and_a_user_token_opens_none(
    app: Flask, client: FlaskClient, trial: int, login: Callable[[str, str], Headers]
) -> None:
    other = _post(client, app, trial, "claim", {"worker": "w"}, token_for=trial + 1)
    assert other.status_code == 403 and f"this token is for trial {trial + 1}" in other.json["error"]["message"]
    root = login("root@example.com", "root-password")
    user = client.post(f"/api/v1/worker/trials/{trial}/claim", json={"worker": "w"}, headers=root)
    assert user.status_code == 401 and "invalid trial token" in user.json["error"]["message"]
    assert _row(app, trial).status is TrialState.PENDING


@pytest.mark.parametrize(
    ("action", "body", "field", "message"),
    [
        ("claim", {}, "worker", "'worker' is required"),
        ("claim", {"worker": 3}, "worker", "must be a string"),
        ("claim", {"worker": "w", "extra": 1}, "extra", "unknown field 'extra'"),
        ("beat", {"attempt": "1"}, "attempt", "must be an integer"),
        ("finish", {"attempt": 1, "status": "PENDING"}, "status",
         "must be one of COMPLETED, ERRORED, INVALID, STOPPED"),
        ("finish", {"attempt": 1, "status": "CANCELLED"}, "status", "must be one of"),
        ("finish", {"attempt": 1, "status": "STOPPED"}, "score", "a STOPPED trial needs a 'score'"),
        ("finish", {"attempt": 1, "status": "DONE"}, "status", "expected one of"),
        ("finish", {"attempt": 1, "status": "COMPLETED"}, "score", "needs a 'score'"),
        ("finish", {"attempt": 1, "status": "COMPLETED", "score": True}, "score", "must be a number"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": 5}, "error", "must be a string"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x", "architecture": RECORD}, "architecture",
         "'architecture' comes only with COMPLETED and STOPPED (trials that finished training), not ERRORED"),
        ("finish", {"attempt": 1, "status": "COMPLETED", "score": 0.5, "architecture": {"nodes": []}}, "architecture",
         "'architecture' must be an object with exactly 'choices', 'graph_key' and 'nodes'"),
        ("finish", {"attempt": 1, "status": "COMPLETED", "score": 0.5,
                    "architecture": _architecture(_node("x"), _node("fc", "y"))}, "architecture",
         "architecture.nodes[1].inputs[0] is 'y', which names no earlier node"),
        ("finish", {"attempt": 1, "status": "COMPLETED", "score": 0.5,
                    "architecture": _architecture(_node("x"), _node("x", "x"))}, "architecture",
         "architecture.nodes[1].name is 'x' again: node names are unique"),
        ("finish", {"attempt": 1, "status": "COMPLETED", "score": 0.5,
                    "architecture": _architecture(_node("x", changed="yes"))}, "architecture",
         "architecture.nodes[0].changed must be a boolean"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x", "fusion_profile": {"best": 2}}, "fusion_profile",
         "'fusion_profile' must be an object with 'max_group' (and 'budget_s') and, once measured, 'samples_per_s'"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x",
                    "fusion_profile": {**MEASURED, "budget_s": -1}}, "fusion_profile",
         "fusion_profile.budget_s must be a number >= 0"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x", "fusion_profile": {"max_group": 0}},
         "fusion_profile", "fusion_profile.max_group must be a whole number from 1 to 1024"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x", "fusion_profile": {**MEASURED, "best": 32}},
         "fusion_profile", "fusion_profile.best must be 1 or one of the sizes measured"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x",
                    "fusion_profile": {**MEASURED, "samples_per_s": {"128": 5.0}}}, "fusion_profile",
         "fusion_profile.samples_per_s has '128': 5.0; sizes run from 1 to max_group"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x",
                    "fusion_profile": {**MEASURED, "samples_per_s": {"1": -1}}}, "fusion_profile",
         "fusion_profile.samples_per_s has '1': -1"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x",
                    "fusion_profile": {"max_group": 64, "best": 1}}, "fusion_profile",
         "'fusion_profile' has part of a measurement: 'samples_per_s', 'seconds', 'reason' missing"),
        ("finish", {"attempt": 1, "status": "ERRORED", "error": "x", "fusion_profile": {**MEASURED, "seconds": "2"}},
         "fusion_profile", "fusion_profile.seconds must be a number >= 0"),
        ("finish", {**DONE, "time_breakdown": [1.0]}, "time_breakdown", "must be an object of phase to seconds"),
        ("finish", {**DONE, "time_breakdown": {"wait": 1.0}}, "time_breakdown",
         "time_breakdown.wait: not a phase a worker measures"),
        ("finish", {**DONE, "time_breakdown": {"sleep": 1.0}}, "time_breakdown",
         "time_breakdown.sleep: not a phase a worker measures"),
        ("finish", {**DONE, "time_breakdown": {"train": "1"}}, "time_breakdown",
         "time_breakdown.train must be a number of seconds"),
        ("finish", {**DONE, "time_breakdown": {"train": True}}, "time_breakdown",
         "time_breakdown.train must be a number of seconds"),
        ("finish", {**DONE, "time_breakdown": {"fetch": -0.5}}, "time_breakdown",
         "time_breakdown.fetch must not be negative"),
        ("finish", {**DONE, "gpu_memory": 5}, "gpu_memory", "must be an object of peak_mb and total_mb"),
        ("finish", {**DONE, "gpu_memory": {"peak_mb": 5}}, "gpu_memory", "gpu_memory: 'total_mb' is required"),
        ("finish", {**DONE, "gpu_memory": {"peak_mb": -1, "total_mb": 8}}, "gpu_memory",
         "gpu_memory: 'peak_mb' is -1; it must be between 0 and"),
        ("finish", {**DONE, "gpu_memory": {"peak_mb": 1.5, "total_mb": 8}}, "gpu_memory",
         "gpu_memory: 'peak_mb' must be an integer"),
        ("claim", {"worker": "w", "take_over": "no"}, "take_over", "must be true or false"),
        ("records", {"metrics": {}}, "metrics", "must be a list of objects"),
        ("records", {"metrics": [{"step": "1", "metrics": {}, "time": "2030-01-01T00:00:00+00:00"}]},
         "metrics[0]", "step must be an integer"),
        ("records", {"metrics": [{"step": 1, "metrics": {"a": "x"}, "time": "2030-01-01T00:00:00+00:00"}]},
         "metrics[0]", "must map names to numbers"),
        ("records", {"logs": [{"line": "x", "time": "yesterday"}]}, "logs[0]", "ISO 8601"),
        ("records", {"logs": [{"line": "x", "time": "2030-01-01T00:00:00"}]}, "logs[0]", "no UTC offset"),
        ("records", {"logs": [{"time": "2030-01-01T00:00:00+00:00"}]}, "logs[0]", "line must be a string"),
        ("finish", {**DONE, "metrics": [{"step": 1, "metrics": {"a": True}, "time": "2030-01-01T00:00:00+00:00"}]},
         "metrics[0]", "must map names to numbers"),
        ("finish", {**DONE, "logs": [{"line": "x", "time": "2030-01-01T00:00:00"}]}, "logs[0]", "no UTC offset"),
        ("finish", {**DONE, "logs": "x"}, "logs", "must be a list of objects"),
        ("finish", {**DONE, "next": [1]}, "next", "'next' must be an object"),
        ("finish", {**DONE, "next": {"trial_id": "2", "token": "t", "worker": "w"}}, "next.trial_id",
         "must be a positive integer"),
        ("finish", {**DONE, "next": {"trial_id": True, "token": "t", "worker": "w"}}, "next.trial_id",
         "must be a positive integer"),
        ("finish", {**DONE, "next": {"trial_id": 2, "worker": "w"}}, "next.token", "the next trial's token"),
        ("finish", {**DONE, "next": {"trial_id": 2, "token": "t", "worker": " "}}, "next.worker", "non-blank"),
        ("finish", {**DONE, "next": {"trial_id": 2, "token": "t", "worker": "w", "attempt": 1}}, "next.attempt",
         "next: unknown field 'attempt'"),
    ],
)  # fmt: skip
def test_bad_worker_requests_are_refused_naming_the_field(
    app: Flask, client: FlaskClient, trial: int, action: str, body: dict[str, Any], field: str, message: str
) -> None:
    if action != "claim":
        assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    response = _post(client, app, trial, action, body)
    assert response.status_code == 400, response.json
    assert response.json["error"]["field"] == field and message in response.json["error"]["message"]
    with session_scope(app.extensions["baobab"].engine) as session:
        assert session.scalars(select(InterimMetric.id).where(InterimMetric.trial_id == trial)).first() is None
    assert _row(app, trial).status is (TrialState.PENDING if action == "claim" else TrialState.RUNNING)


# -- one request a trial: the finish carries the last records and claims the next trial --------------


@pytest.fixture
def second(app: Flask, trial: int) -> int:
    """Another PENDING trial of the same sub-job as ``trial``."""
    engine = app.extensions["baobab"].engine
    return add_trial(engine, _row(app, trial).sub_job_id, 1, TrialState.PENDING)


def _next(app: Flask, trial_id: int, worker: str = "w0@a:1", **extra: Any) -> dict[str, Any]:
    token = issue_trial_token(app.extensions["baobab"].settings.signing_key(), trial_id)
    return {"trial_id": trial_id, "token": token, "worker": worker, **extra}


def test_a_finish_brings_the_last_records_and_claims_the_workers_next_trial_in_one_transaction(
    app: Flask, client: FlaskClient, trial: int, second: int
) -> None:
    events = app.extensions["baobab"].events.subscribe(EventKind.TRIAL_FINISHED, EventKind.TRIAL_METRICS)
    assert _post(client, app, trial, "claim", {"worker": "w0@a:1"}).json["claim"]["attempt"] == 1
    now = datetime.now(UTC).isoformat()
    body = {**DONE, "params_path": "params/t.safetensors",
            "metrics": [{"step": 3, "metrics": {"loss": 0.25}, "time": now}],
            "logs": [{"line": "last epoch", "time": now}], "next": _next(app, second)}  # fmt: skip
    answer = _post(client, app, trial, "finish", body)
    assert answer.status_code == 200, answer.json
    assert answer.json["status"] == "COMPLETED" and answer.json["next"]["refused"] is None
    claim = answer.json["next"]["claim"]
    assert claim["trial_id"] == second and claim["attempt"] == 1 and claim["number"] == 1 and claim["template_key"]
    done, running = _row(app, trial), _row(app, second)
    assert (done.status, done.score, done.params_path) == (TrialState.COMPLETED, 0.5, "params/t.safetensors")
    assert running.status is TrialState.RUNNING and running.worker == "w0@a:1"
    assert done.finished_at == running.started_at  # one transaction, one clock reading
    with session_scope(app.extensions["baobab"].engine) as session:
        assert session.scalars(select(InterimMetric.metrics).where(InterimMetric.trial_id == trial)).all() == [
            {"loss": 0.25}
        ]
        assert session.scalars(select(TrialLog.line).where(TrialLog.trial_id == trial)).all() == ["last epoch"]
    assert {events.get(timeout=5), events.get(timeout=5)} == {
        Event(EventKind.TRIAL_METRICS, trial),
        Event(EventKind.TRIAL_FINISHED, trial),
    }


def test_a_finish_and_the_claim_it_carries_keep_each_its_own_rules(
    app: Flask, client: FlaskClient, trial: int, second: int
) -> None:
    timeout = app.extensions["baobab"].settings.heartbeat_timeout_s
    # The next trial runs on a live worker (a second delivery of its message): refused, to be asked again
    # later, while the outcome is stored.
    assert _post(client, app, second, "claim", {"worker": "other"}).status_code == 200
    assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    answer = _post(client, app, trial, "finish", {**DONE, "next": _next(app, second, "w")}).json
    assert answer["status"] == "COMPLETED" and answer["next"]["claim"] is None
    refused = answer["next"]["refused"]
    assert refused["status"] == "RUNNING" and 0 < refused["retry_after_s"] <= timeout
    assert _row(app, trial).status is TrialState.COMPLETED and _row(app, second).worker == "other"

    # An outcome whose claim is no longer current (the trial was taken over) is not stored; the next trial is
    # claimed all the same (here: taken over from its silent worker, without a take-over for a group member).
    third = add_trial(app.extensions["baobab"].engine, _row(app, trial).sub_job_id, 2, TrialState.PENDING)
    assert _post(client, app, third, "claim", {"worker": "old"}).status_code == 200
    _go_silent(app, third, timeout + 1)
    _go_silent(app, second, timeout + 1)
    assert _post(client, app, third, "claim", {"worker": "new"}).json["claim"]["attempt"] == 2
    group = _post(client, app, third, "finish", {**DONE, "next": _next(app, second, "old", take_over=False)}).json
    assert group == {"status": "RUNNING", "next": {"claim": None, "refused": {
        "status": "RUNNING", "reason": f"trial {second} is RUNNING", "retry_after_s": None}}}  # fmt: skip
    late = _post(client, app, third, "finish", {**DONE, "next": _next(app, second, "old")}).json
    assert late["status"] == "RUNNING" and late["next"]["claim"]["attempt"] == 2
    assert _row(app, third).worker == "new" and _row(app, third).score is None
    assert _row(app, second).worker == "old"

    # A finished next trial is refused for good.
    repeated = _post(client, app, trial, "finish", {**DONE, "next": _next(app, trial)}).json
    assert repeated["next"]["refused"] == {"status": "COMPLETED", "reason": f"trial {trial} is COMPLETED",
                                           "retry_after_s": None}  # fmt: skip


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("forged.token.here", "'next.token' is not a trial token"),
        (None, "'next.token' is the token of trial"),
    ],
)
def test_a_next_trial_needs_its_own_token(
    app: Flask, client: FlaskClient, trial: int, second: int, token: str | None, message: str
) -> None:
    assert _post(client, app, trial, "claim", {"worker": "w"}).status_code == 200
    nxt = _next(app, second) if token is not None else _next(app, trial)  # the finished trial's own token
    nxt = {**nxt, "trial_id": second} if token is None else {**nxt, "token": token}
    response = _post(client, app, trial, "finish", {**DONE, "next": nxt})
    assert response.status_code == 403 and response.json["error"]["field"] == "next.token"
    assert message in response.json["error"]["message"]
    assert _row(app, trial).status is TrialState.RUNNING and _row(app, second).status is TrialState.PENDING
