"""``GET /api/v1/trials/<id>`` answers a trial's lineage: its chain of parents, as far as the caller may see.

The chain is built from rows: alice's trial a2 starts from her trial a1's zoo model; a1
from bob's PUBLIC zoo model of his trial b1; b1 from bob's PRIVATE model of b0; b0 from
a PUBLIC model the admin uploaded. Alice sees her trials and the upload, not bob's trials.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, event
from train_job_world import add_model, add_trial, job_body, upload_dataset

from baobab.advisor._scheduling import shared_key
from baobab.model import Task
from baobab.store import (
    InterimMetric,
    MergeRecord,
    ModelAccess,
    TrialState,
    UserRole,
    ZooModel,
    record_shared_merges,
    session_scope,
)
from baobab.zoo import MAX_DEPTH

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]


def _sub_job(app: Flask, client: FlaskClient, owner_id: int, headers: Headers, name: str) -> int:
    data = upload_dataset(client, headers)
    model = add_model(app.extensions["baobab"].engine, owner_id, name=f"{name}-model")
    response = client.post("/api/v1/train_jobs", json=job_body(data, data, [model], app=name), headers=headers)
    assert response.status_code == 201, response.json
    return int(response.json["sub_jobs"][0]["id"])


def _trained(engine: Engine, sub_job: int, number: int, epochs: int, **columns: Any) -> int:
    """A COMPLETED trial that reported ``epochs`` steps (a retried epoch reported twice counts once)."""
    trial = add_trial(
        engine, sub_job, number, TrialState.COMPLETED, 0.5, params_path=f"params/{sub_job}-{number}", **columns
    )
    with session_scope(engine) as session:
        for step in [*range(epochs), *range(min(epochs, 1))]:
            session.add(InterimMetric(trial_id=trial, step=step, metrics={"loss": 1.0}))
    return trial


def _zoo(engine: Engine, owner_id: int, access: ModelAccess, trial_id: int | None = None) -> int:
    row = ZooModel(
        owner_id=owner_id, access=access, task=Task.TABULAR_CLASSIFICATION, name="m", trial_id=trial_id, score=0.5,
        graph="{}", signature="[]", fingerprint="0" * 64, io_signature="io", traced=True, node_count=1,
        param_count=1, params_path=f"zoo/{trial_id}", owns_params=trial_id is None, size_bytes=1,
    )  # fmt: skip
    with session_scope(engine) as session:
        session.add(row)
    return row.id


@pytest.fixture
def chain(app: Flask, client: FlaskClient, add_user: AddUser, root: Headers) -> dict[str, Any]:
    engine = app.extensions["baobab"].engine
    alice, alice_headers = add_user(UserRole.MODEL_DEVELOPER)
    bob, bob_headers = add_user(UserRole.MODEL_DEVELOPER)
    mine = _sub_job(app, client, alice["id"], alice_headers, "mine")
    theirs = _sub_job(app, client, bob["id"], bob_headers, "theirs")
    upload = _zoo(engine, 1, ModelAccess.PUBLIC)
    b0 = _trained(engine, theirs, 0, 5, parent_zoo_model_id=upload, similarity=0.5)
    z_b0 = _zoo(engine, bob["id"], ModelAccess.PRIVATE, b0)
    b1 = _trained(engine, theirs, 1, 2, parent_zoo_model_id=z_b0, similarity=0.9)
    z_b1 = _zoo(engine, bob["id"], ModelAccess.PUBLIC, b1)
    a1 = _trained(engine, mine, 0, 3, parent_zoo_model_id=z_b1, similarity=0.8)
    z_a1 = _zoo(engine, alice["id"], ModelAccess.PRIVATE, a1)
    a2 = _trained(engine, mine, 1, 4, parent_zoo_model_id=z_a1, similarity=1.0, phase="final")
    a3 = _trained(engine, mine, 2, 1, shared_params_path=f"params/{mine}-1", phase="search")
    return {
        "alice": alice_headers, "bob": bob_headers, "root": root, "mine": mine, "upload": upload,
        "b0": b0, "z_b0": z_b0, "b1": b1, "z_b1": z_b1, "a1": a1, "z_a1": z_a1, "a2": a2, "a3": a3,
    }  # fmt: skip


def _lineage(client: FlaskClient, trial_id: int, headers: Headers) -> dict[str, Any]:
    response = client.get(f"/api/v1/trials/{trial_id}", headers=headers)
    assert response.status_code == 200, response.json
    return dict(response.json)


def _ancestor(via: str, trial_id: int | None, zoo_id: int | None, similarity: float | None, epochs: int | None,
              phase: str | None = None, job: int | None = None, number: int | None = None,
              source: str = "trial", merged_onto: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    app, version = ("mine", 1) if job is not None else (None, None)
    return {
        "via": via, "source": source, "trial_id": trial_id, "number": number, "train_job_id": job, "app": app,
        "app_version": version, "zoo_model_id": zoo_id, "similarity": similarity, "epochs": epochs, "phase": phase,
        "merged_onto": merged_onto,
    }  # fmt: skip


def test_lineage_hides_other_users_ancestors_and_counts_their_epochs(
    client: FlaskClient, chain: dict[str, Any]
) -> None:
    c = chain
    shown = _lineage(client, c["a2"], c["alice"])
    job = shown["train_job_id"]
    assert shown["phase"] == "final"
    assert shown["parent_zoo_model_id"] == c["z_a1"]
    assert shown["lineage"] == {
        "from": "zoo",
        "chain": [
            _ancestor("zoo", c["a1"], c["z_a1"], 1.0, 3, job=job, number=0),
            {"hidden": True},  # b1: bob's trial, though its zoo model is PUBLIC
            {"hidden": True},  # b0: bob's, PRIVATE
            _ancestor("zoo", None, c["upload"], 0.5, None, source="upload"),  # a PUBLIC upload
        ],
        "inherited_epochs": 3 + 2 + 5,
        "truncated": False,
    }
    shared = _lineage(client, c["a3"], c["alice"])["lineage"]
    assert shared["from"] == "shared_params"
    assert shared["chain"][0] == _ancestor("shared_params", c["a2"], None, None, 4, "final", job, 1)
    assert shared["chain"][1:] == shown["lineage"]["chain"]
    assert shared["inherited_epochs"] == 4 + 10

    whole = _lineage(client, c["a2"], c["root"])["lineage"]  # an admin sees every ancestor
    assert [a["trial_id"] for a in whole["chain"]] == [c["a1"], c["b1"], c["b0"], None]
    assert [a["zoo_model_id"] for a in whole["chain"]] == [c["z_a1"], c["z_b1"], c["z_b0"], c["upload"]]
    assert [a["epochs"] for a in whole["chain"]] == [3, 2, 5, None]
    assert whole["inherited_epochs"] == 10

    mine = _lineage(client, c["b1"], c["bob"])["lineage"]
    assert [a["trial_id"] for a in mine["chain"]] == [c["b0"], None]
    assert client.get(f"/api/v1/trials/{c['a2']}", headers=c["bob"]).status_code == 404


def test_a_trial_from_scratch_and_a_parent_gone_since(app: Flask, client: FlaskClient, chain: dict[str, Any]) -> None:
    c = chain
    engine = app.extensions["baobab"].engine
    scratch = _trained(engine, c["mine"], 10, 2)
    gone = _trained(engine, c["mine"], 11, 2, parent_zoo_model_id=10**6, similarity=0.3)
    lost = _trained(engine, c["mine"], 12, 2, shared_params_path="params/deleted")
    assert _lineage(client, scratch, c["alice"])["lineage"] == {
        "from": "scratch", "chain": [], "inherited_epochs": 0, "truncated": False
    }  # fmt: skip
    assert _lineage(client, gone, c["alice"])["lineage"]["chain"] == [
        _ancestor("zoo", None, 10**6, 0.3, None, source="removed")
    ]
    assert _lineage(client, lost, c["alice"])["lineage"]["chain"] == [
        _ancestor("shared_params", None, None, None, None, source="removed")
    ]
    listed = client.get("/api/v1/train_jobs/mine/1/trials", headers=c["alice"])
    assert listed.status_code == 200 and all("lineage" not in t for t in listed.json["trials"])


def _statements(engine: Engine, call: Callable[[], Any]) -> list[str]:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement.lower())

    event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return statements


def test_a_long_chain_is_cut_and_read_in_a_bounded_number_of_queries(
    app: Flask, client: FlaskClient, chain: dict[str, Any]
) -> None:
    c = chain
    engine = app.extensions["baobab"].engine
    trials = [_trained(engine, c["mine"], 100, 1)]
    for n in range(1, MAX_DEPTH + 5):
        trials.append(_trained(engine, c["mine"], 100 + n, 1, shared_params_path=f"params/{c['mine']}-{99 + n}"))
    short = _statements(engine, lambda: _lineage(client, trials[2], c["alice"]))
    long = _statements(engine, lambda: _lineage(client, trials[-1], c["alice"]))
    lineage = _lineage(client, trials[-1], c["alice"])["lineage"]
    assert lineage["truncated"] is True
    assert len(lineage["chain"]) == MAX_DEPTH and lineage["inherited_epochs"] == MAX_DEPTH
    assert [a["trial_id"] for a in lineage["chain"][:2]] == [trials[-2], trials[-3]]
    assert len(long) == len(short), long
    assert sum(bool(re.search(r"\bwith recursive\b", s)) for s in long) == 1
    exact = _lineage(client, trials[MAX_DEPTH], c["alice"])["lineage"]  # exactly MAX_DEPTH ancestors: not cut
    assert (len(exact["chain"]), exact["truncated"]) == (MAX_DEPTH, False)


def test_a_trial_started_from_shared_trainings_added_up_names_both(
    app: Flask, client: FlaskClient, chain: dict[str, Any]
) -> None:
    """Trials 21 and 22 trained from 20's shared weights at once; 21 finished first and shared its own, then 22's
    update was added onto them (the driver's key says so). Trial 23 started from the sum: its lineage lists 22's
    update, merged onto 21's weights, then 22's own start, 20. The merge is read from the store, where the driver
    records it (as here), not from the key's name."""
    c = chain
    engine = app.extensions["baobab"].engine
    path = f"params/{c['mine']}"
    start = _trained(engine, c["mine"], 20, 2, phase="train_shared")
    onto = _trained(engine, c["mine"], 21, 1, shared_params_path=f"{path}-20", phase="train_shared")
    update = _trained(engine, c["mine"], 22, 1, shared_params_path=f"{path}-20", phase="train_shared")
    merged_key = shared_key(f"{path}-22", 21)
    child = _trained(engine, c["mine"], 23, 0, shared_params_path=merged_key, phase="evaluate")
    with session_scope(engine) as session:
        record_shared_merges(session, [MergeRecord(merged_key, update, 21)])
    shown = _lineage(client, child, c["alice"])
    job = shown["train_job_id"]
    assert shown["lineage"] == {
        "from": "shared_params",
        "chain": [
            _ancestor(
                "shared_params",
                update,
                None,
                None,
                1,
                "train_shared",
                job,
                22,
                source="merged",
                merged_onto={"trial_id": onto, "number": 21},
            ),
            _ancestor("shared_params", start, None, None, 2, "train_shared", job, 20),
        ],
        "inherited_epochs": 1 + 2,
        "truncated": False,
    }
    assert [a["trial_id"] for a in _lineage(client, onto, c["alice"])["lineage"]["chain"]] == [start]
    # The trial merged onto is gone: named by its number only.
    gone_onto_key = shared_key(f"{path}-22", 99)
    gone_onto = _trained(engine, c["mine"], 24, 0, shared_params_path=gone_onto_key)
    with session_scope(engine) as session:
        record_shared_merges(session, [MergeRecord(gone_onto_key, update, 99)])
    (merged, _) = _lineage(client, gone_onto, c["alice"])["lineage"]["chain"]
    assert (merged["trial_id"], merged["merged_onto"]) == (update, {"trial_id": None, "number": 99})
    # Weights no merge was recorded for end the link, whatever their name says (their trial was deleted, and its
    # merges with it).
    gone = _trained(engine, c["mine"], 25, 0, shared_params_path=shared_key(f"{path}-77", 21))
    assert _lineage(client, gone, c["alice"])["lineage"]["chain"] == [
        _ancestor("shared_params", None, None, None, None, source="removed")
    ]
