"""``/api/v1/inference_jobs/<id>/versions``, ``.../promote``, ``.../rollback``, ``.../revisions``: what is wanted,
each bad field named with the versions left as they were, owners and admins only.

What the predictor does with the versions (loading, routing, swapping) is tested on real predictors in
``tests/predictor_tests/test_predictor_versions.py``; here the predictor's one write, the revision it
serves, is made as it makes it (``record_served_revision``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import AddUser, Headers
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select
from test_inference_job_endpoints import SHOP_V1, add_train_job, member, upload_dataset

from baobab.model import Task
from baobab.store import (
    InferenceJob,
    InferenceJobStatus,
    InferenceRevision,
    TrainJob,
    Trial,
    TrialState,
    UserRole,
    record_revision_error,
    record_served_revision,
    session_scope,
)

URL = "/api/v1/inference_jobs"


@dataclass
class World:
    """alice's app "shop" (v1: SHOP_V1, v2: one trial, v3: a regression job), her app "other"; bob's "zoo"."""

    app: Flask
    client: FlaskClient
    alice: Headers
    bob: Headers
    admin: Headers
    shop: list[int]
    shop_v2: list[int]
    regression: list[int]
    other: list[int]
    zoo: list[int]

    def job(self, trial_ids: list[int]) -> int:
        response = self.client.post(
            URL, json={"app": "shop", "app_version": 1, "trial_ids": trial_ids}, headers=self.alice
        )
        assert response.status_code == 201, response.json
        return response.json["id"]

    def versions(self, job_id: int, headers: Headers | None = None) -> Any:
        return self.client.get(f"{URL}/{job_id}/versions", headers=headers or self.alice)

    def put(self, job_id: int, versions: Any, headers: Headers | None = None) -> Any:
        return self.client.put(f"{URL}/{job_id}/versions", json={"versions": versions}, headers=headers or self.alice)

    def promote(self, job_id: int, name: str, headers: Headers | None = None) -> Any:
        return self.client.post(f"{URL}/{job_id}/versions/{name}/promote", headers=headers or self.alice)

    def rollback(self, job_id: int, headers: Headers | None = None) -> Any:
        return self.client.post(f"{URL}/{job_id}/rollback", headers=headers or self.alice)

    def revisions(self, job_id: int) -> int:
        with session_scope(self.app.extensions["baobab"].engine) as session:
            where = InferenceRevision.inference_job_id == job_id
            return session.scalar(select(func.count()).select_from(InferenceRevision).where(where)) or 0

    def served(self, job_id: int, revision: int) -> None:
        """What the predictor writes once it serves ``revision``."""
        with session_scope(self.app.extensions["baobab"].engine) as session:
            assert record_served_revision(session, job_id, revision)


@pytest.fixture
def world(app: Flask, client: FlaskClient, add_user: AddUser) -> Iterator[World]:
    alice_user, alice = add_user(UserRole.MODEL_DEVELOPER)
    bob_user, bob = add_user(UserRole.APP_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)
    alice_data, bob_data = upload_dataset(client, alice), upload_dataset(client, bob)
    alice_id = alice_user["id"]
    regression = add_train_job(app, alice_id, alice_data, "shop", 3, [("linear", TrialState.COMPLETED, 0.4, True)])
    with session_scope(app.extensions["baobab"].engine) as session:  # one app, two tasks: nothing forbids it
        session.scalars(select(TrainJob).where(TrainJob.app_version == 3)).one().task = Task.TABULAR_REGRESSION
    yield World(
        app=app, client=client, alice=alice, bob=bob, admin=admin,
        shop=add_train_job(app, alice_id, alice_data, "shop", 1, SHOP_V1),
        shop_v2=add_train_job(app, alice_id, alice_data, "shop", 2, [("linear", TrialState.COMPLETED, 0.5, True)]),
        regression=regression,
        other=add_train_job(app, alice_id, alice_data, "other", 1, [("linear", TrialState.COMPLETED, 0.9, True)]),
        zoo=add_train_job(app, bob_user["id"], bob_data, "zoo", 1, [("net", TrialState.COMPLETED, 0.99, True)]),
    )  # fmt: skip


def version(name: str, weight: float, share: float, *members: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name, "weight": weight, "share": share,
        "trial_ids": [m["trial_id"] for m in members], "members": list(members),
    }  # fmt: skip


def test_versions_are_set_promoted_and_rolled_back_each_as_a_revision(world: World) -> None:
    w, shop = world, world.shop
    best, second, v2_trial = member(shop[5], "forest", 0.95), member(shop[0], "linear", 0.9), w.shop_v2[0]
    job_id = w.job([shop[0], shop[5]])
    first = w.versions(job_id)
    assert first.status_code == 200, first.json
    v1 = version("v1", 1.0, 1.0, best, second)
    assert first.json == {
        "inference_job_id": job_id, "status": "STARTING", "revision": 1, "versions": [v1], "rollback_to": None,
        "error": None, "served_revision": None, "served_versions": None, "converged": False,
    }  # fmt: skip

    # A canary: the trial of version 2 of the app, a tenth of the traffic.
    canary = [
        {"name": "v1", "trial_ids": [shop[0], shop[5]], "weight": 9},
        {"name": "v2", "trial_ids": [v2_trial, shop[1]], "weight": 1},
    ]
    rolled = w.put(job_id, canary)
    assert rolled.status_code == 200, rolled.json
    v2 = version("v2", 1.0, 0.1, member(v2_trial, "linear", 0.5), member(shop[1], "linear", 0.7))
    v2["members"].reverse()
    v2["trial_ids"].reverse()  # best first: shop[1] (0.7), then v2_trial (0.5)
    canary_versions = [version("v1", 9.0, 0.9, best, second), v2]
    assert (rolled.json["revision"], rolled.json["versions"], rolled.json["rollback_to"]) == (2, canary_versions, 1)
    assert (rolled.json["served_revision"], rolled.json["converged"]) == (None, False)
    # The same versions again are no change (the order of trial ids does not matter).
    again = w.put(job_id, [{**canary[0], "trial_ids": [shop[5], shop[0]]}, canary[1]])
    assert (again.status_code, again.json) == (200, rolled.json)
    assert w.revisions(job_id) == 2

    w.served(job_id, 1)
    assert w.versions(job_id).json["served_versions"] == [v1]
    w.served(job_id, 2)
    served = w.versions(job_id).json
    assert (served["served_revision"], served["served_versions"], served["converged"]) == (2, canary_versions, True)

    promoted = w.promote(job_id, "v2")
    assert promoted.status_code == 200, promoted.json
    assert (promoted.json["revision"], promoted.json["rollback_to"]) == (3, 2)
    assert promoted.json["versions"] == [{**v2, "weight": 1.0, "share": 1.0}]
    assert (promoted.json["served_revision"], promoted.json["converged"]) == (2, False)
    assert w.promote(job_id, "v2").json == promoted.json  # promoted already: no change
    missing = w.promote(job_id, "v1")  # no longer wanted
    assert (missing.status_code, missing.json["error"]["message"]) == (
        404, f"inference job {job_id} has no version 'v1'; its versions are v2"
    )  # fmt: skip

    # Each rollback goes one step further back; the first revision has nothing before it.
    back = w.rollback(job_id)
    assert back.status_code == 200, back.json
    assert (back.json["revision"], back.json["versions"], back.json["rollback_to"]) == (4, canary_versions, 1)
    back = w.rollback(job_id)
    assert (back.json["revision"], back.json["versions"], back.json["rollback_to"]) == (5, [v1], None)
    refused = w.rollback(job_id)
    assert (refused.status_code, refused.json["error"]["code"]) == (409, "conflict")
    assert refused.json["error"]["message"] == (
        f"inference job {job_id} has nothing to roll back to: revision 5 (ROLLBACK) replaced no earlier versions"
    )
    assert w.revisions(job_id) == 5

    history = w.client.get(f"{URL}/{job_id}/revisions", headers=w.alice)
    assert history.status_code == 200, history.json
    revisions = history.json["revisions"]
    assert [(r["revision"], r["action"], r["rollback_to"]) for r in revisions] == [
        (5, "ROLLBACK", None), (4, "ROLLBACK", 1), (3, "PROMOTE", 2), (2, "ROLLOUT", 1), (1, "CREATE", None),
    ]  # fmt: skip
    assert revisions[1]["versions"] == canary_versions and revisions[4]["versions"] == [v1]
    newest = w.client.get(f"{URL}/{job_id}/revisions?limit=2", headers=w.alice).json["revisions"]
    assert [r["revision"] for r in newest] == [5, 4]
    bad_limit = w.client.get(f"{URL}/{job_id}/revisions?limit=0", headers=w.alice)
    assert (bad_limit.status_code, bad_limit.json["error"]["field"]) == (400, "limit")

    # The job shows what it wants: its revision, its versions and their trials.
    job = w.client.get(f"{URL}/{job_id}", headers=w.alice).json
    assert (job["revision"], job["served_revision"], job["members"]) == (5, 2, [best, second])
    assert job["versions"] == [{"name": "v1", "weight": 1.0, "trial_ids": [shop[5], shop[0]]}]


def test_a_revision_the_predictor_could_not_serve_says_why_and_may_be_asked_for_again(world: World) -> None:
    w, shop = world, world.shop
    job_id = w.job([shop[0]])
    wanted = [{"name": "v2", "trial_ids": [shop[1]]}]
    assert w.put(job_id, wanted).json["revision"] == 2
    with session_scope(w.app.extensions["baobab"].engine) as session:  # as the predictor records it
        assert record_revision_error(session, job_id, 2, "no member could be loaded: trial 2: boom")
    shown = w.versions(job_id).json
    assert (shown["revision"], shown["error"], shown["converged"]) == (
        2,
        "no member could be loaded: trial 2: boom",
        False,
    )
    # Asking for the same versions again is trying again: a new revision, without the error.
    retried = w.put(job_id, wanted).json
    assert (retried["revision"], retried["error"], retried["rollback_to"]) == (3, None, 2)


def test_bad_versions_are_400_naming_the_field_and_change_nothing(world: World) -> None:
    w, shop = world, world.shop
    job_id = w.job([shop[0]])
    assert w.put(job_id, [{"name": "v1", "trial_ids": [shop[0]], "weight": 3}]).json["revision"] == 2
    before = w.versions(job_id).json

    def one(**fields: Any) -> list[dict[str, Any]]:
        return [{"name": "v1", "trial_ids": [shop[0]], **fields}]

    ok = {"name": "v1", "trial_ids": [shop[0]]}
    cases: list[tuple[Any, str, str]] = [
        ([], "versions", r"'versions' must be a non-empty array of versions, got \[\]"),
        ("v1", "versions", r"'versions' must be a non-empty array"),
        ([ok, "v2"], "versions[1]", r"versions\[1\] must be an object with name, trial_ids, weight, got 'v2'"),
        ([{**ok, "k": 1}], "versions[0].k", r"versions\[0\]: unknown field 'k'; known fields: name, trial_ids, weight"),
        ([{"trial_ids": [shop[0]]}], "versions[0].name", r"versions\[0\]\.name must be 1 to 64 letters, .*got None"),
        (one(name=""), "versions[0].name", r"must be 1 to 64 letters"),
        (one(name="my version"), "versions[0].name", r"got 'my version'"),
        (one(name="-v"), "versions[0].name", r"starting with a letter or digit, got '-v'"),
        (one(name="v" * 65), "versions[0].name", r"must be 1 to 64 letters"),
        (one(name=7), "versions[0].name", r"got 7"),
        ([ok, {**ok, "trial_ids": [shop[1]]}], "versions[1].name",
         r"versions\[1\]\.name: 'v1' is already the name of versions\[0\]; each version needs its own"),
        (one(weight=-0.5), "versions[0].weight", r"'versions\[0\]\.weight' is -0.5; it must be between 0 and 1000000"),
        (one(weight=2e6), "versions[0].weight", r"is 2000000.0; it must be between 0 and 1000000"),
        (one(weight="0.5"), "versions[0].weight", r"'versions\[0\]\.weight' must be a number, got '0.5'"),
        (one(weight=True), "versions[0].weight", r"must be a number, got True"),
        ([{**ok, "weight": 0}, {"name": "v2", "trial_ids": [shop[1]], "weight": 0}], "versions",
         r"the versions' weights sum to 0, so no version would get a request"),
        ([{"name": "v1"}], "versions[0].trial_ids", r"'versions\[0\]\.trial_ids' must be a non-empty array .*None"),
        (one(trial_ids=[]), "versions[0].trial_ids", r"must be a non-empty array of trial ids, got \[\]"),
        (one(trial_ids=[shop[0], "1"]), "versions[0].trial_ids[1]", r"must be an integer trial id, got '1'"),
        (one(trial_ids=[shop[0], shop[0]]), "versions[0].trial_ids[1]",
         rf"trial {shop[0]} is already versions\[0\]\.trial_ids\[0\]"),
        (one(trial_ids=[0]), "versions[0].trial_ids[0]", r"there is no trial with id 0"),
        (one(trial_ids=[99_999]), "versions[0].trial_ids[0]", r"app 'shop' has no trial with id 99999$"),
        # Of someone else (the same answer as a missing one), of another app, of another task.
        ([ok, {"name": "v2", "trial_ids": [shop[1], w.zoo[0]]}], "versions[1].trial_ids[1]",
         rf"app 'shop' has no trial with id {w.zoo[0]}$"),
        (one(trial_ids=[w.other[0]]), "versions[0].trial_ids[0]",
         rf"trial {w.other[0]} is of app 'other'; a version serves trials of the inference job's app, 'shop'"),
        (one(trial_ids=[w.regression[0]]), "versions[0].trial_ids[0]",
         rf"trial {w.regression[0]} is of a TABULAR_REGRESSION train job; this inference job serves TABULAR_CLASSIFI"),
        # Not servable: not trained, or no parameters.
        (one(trial_ids=[shop[2]]), "versions[0].trial_ids[0]", rf"trial {shop[2]} is ERRORED; only COMPLETED or"),
        (one(trial_ids=[shop[3]]), "versions[0].trial_ids[0]", rf"trial {shop[3]} is RUNNING"),
        (one(trial_ids=[shop[6]]), "versions[0].trial_ids[0]", rf"trial {shop[6]} is COMPLETED but stored no"),
        ([{"name": f"v{i}", "trial_ids": [shop[0]]} for i in range(9)], "versions", r"has 9 versions, at most 8"),
        ([{"name": f"v{i}", "trial_ids": list(range(i * 20 + 1, i * 20 + 21))} for i in range(2)], "versions",
         r"the versions need 40 inference workers .* at most 20 are allowed"),
    ]  # fmt: skip
    for versions, field, message in cases:
        response = w.put(job_id, versions)
        assert response.status_code == 400, (versions, response.json)
        error = response.json["error"]
        assert (error["code"], error["field"]) == ("bad_request", field), (versions, error)
        assert re.search(message, error["message"]), (versions, error["message"])

    for body, field, message in [
        ({}, "versions", r"'versions' is required"),
        ({"versions": [ok], "force": True}, "force", r"unknown field 'force'"),
    ]:
        response = w.client.put(f"{URL}/{job_id}/versions", json=body, headers=w.alice)
        assert (response.status_code, response.json["error"]["field"]) == (400, field), (body, response.json)
        assert re.search(message, response.json["error"]["message"])
    raw = w.client.put(
        f"{URL}/{job_id}/versions", data='{"versions": [{"name": "v1", "trial_ids": [1], "weight": NaN}]}',
        content_type="application/json", headers=w.alice,
    )  # fmt: skip
    assert (raw.status_code, raw.json["error"]["field"]) == (400, "versions[0].weight")

    # The policies of a trial make it no final model: refused as well.
    with session_scope(w.app.extensions["baobab"].engine) as session:
        trial = session.get(Trial, shop[1])
        assert trial is not None
        trial.policies, trial.servable = {"QUICK_EVAL": True}, False
    response = w.put(job_id, one(trial_ids=[shop[1]]))
    assert (response.status_code, response.json["error"]["field"]) == (400, "versions[0].trial_ids[0]")
    assert "ran with QUICK_EVAL" in response.json["error"]["message"]

    assert w.versions(job_id).json == before
    assert w.revisions(job_id) == 2

    # A job that ended serves nothing more: its versions no longer change.
    w.client.post(f"{URL}/{job_id}/stop", headers=w.alice)
    for response in (w.put(job_id, [ok]), w.promote(job_id, "v1"), w.rollback(job_id)):
        assert (response.status_code, response.json["error"]["code"]) == (409, "conflict")
        assert response.json["error"]["message"].startswith(f"inference job {job_id} is STOPPED; its versions can")
    assert w.versions(job_id).json == {**before, "status": "STOPPED"}
    assert w.revisions(job_id) == 2


def test_only_the_owner_and_admins_see_and_change_the_versions(world: World) -> None:
    w, shop = world, world.shop
    job_id = w.job([shop[0]])
    wanted = [{"name": "v2", "trial_ids": [shop[1]]}]
    for refused in (
        w.versions(job_id, w.bob),
        w.put(job_id, wanted, w.bob),
        w.promote(job_id, "v1", w.bob),
        w.rollback(job_id, w.bob),
        w.client.get(f"{URL}/{job_id}/revisions", headers=w.bob),
    ):
        assert (refused.status_code, refused.json["error"]["message"]) == (404, f"no inference job with id {job_id}")
    assert w.revisions(job_id) == 1

    # An admin sees and changes anyone's; the trials must still be of the job owner's app.
    assert w.versions(job_id, w.admin).status_code == 200
    assert w.put(job_id, wanted, w.admin).json["revision"] == 2
    assert w.rollback(job_id, w.admin).json["revision"] == 3
    assert w.promote(job_id, "v1", w.admin).json["revision"] == 3  # v1 is alone already
    with session_scope(w.app.extensions["baobab"].engine) as session:
        job = session.get(InferenceJob, job_id)
        assert job is not None and (job.revision, job.status) == (3, InferenceJobStatus.STARTING)

    for method, path in [
        ("get", f"{URL}/{job_id}/versions"), ("put", f"{URL}/{job_id}/versions"),
        ("post", f"{URL}/{job_id}/versions/v1/promote"), ("post", f"{URL}/{job_id}/rollback"),
        ("get", f"{URL}/{job_id}/revisions"),
    ]:  # fmt: skip
        assert getattr(w.client, method)(path, json={"versions": wanted}).status_code == 401, (method, path)
    missing = w.versions(99_999, w.admin)
    assert (missing.status_code, missing.json["error"]["message"]) == (404, "no inference job with id 99999")
