"""A train job asks for at most what the cluster has: ``budget.GPU_COUNT`` above its GPUs, or a launch's
``options.resources`` above the largest machine's cores or memory, is a 400 naming what there is.

Before this check, a job asking for a GPU on a platform with none was accepted and trained on
the CPU without saying so. What the cluster offers is what its live workers reported (the store's
``workers``, which the executors keep: tests/worker_tests and tests/cluster_tests check that they
do; here rows are written as they would); before any did, or under the pool executors, it is
``BAOBAB_GPUS`` (by default the NVIDIA devices the API's machine shows), or under the kubernetes
executor what its GPU pods can add up to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import add_model, job_body, upload_dataset

from baobab import Settings
from baobab._settings import Executor, _default_gpus
from baobab.admin._cluster_offer import ClusterOffer, cluster_offer
from baobab.store import Gpu, Inventory, UserRole, report_workers, session_scope

AddUser = Callable[[UserRole], tuple[dict[str, Any], dict[str, str]]]


@pytest.fixture(params=[{"gpus": 0}, {"gpus": 2}], ids=["no-gpu", "two-gpus"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return dataclasses.replace(settings, **request.param)


def test_a_job_asking_for_more_gpus_than_the_platform_has_is_refused(
    app: Flask, client: FlaskClient, add_user: AddUser, settings: Settings
) -> None:
    user, headers = add_user(UserRole.APP_DEVELOPER)
    data = upload_dataset(client, headers)
    model = add_model(app.extensions["baobab"].engine, user["id"])
    gpus = settings.gpus

    def create(gpu_count: int) -> Any:
        body = job_body(data, data, [model], budget={"MODEL_TRIAL_COUNT": 2, "GPU_COUNT": gpu_count})
        return client.post("/api/v1/train_jobs", json=body, headers=headers)

    refused = create(gpus + 1)
    assert refused.status_code == 400, refused.json
    error = refused.json["error"]
    assert error["field"] == "budget.GPU_COUNT"
    offered = "has no GPU" if gpus == 0 else "has 2 GPUs"
    assert error["message"].startswith(f"budget.GPU_COUNT is {gpus + 1}, but this platform {offered} (BAOBAB_GPUS)")
    assert client.get("/api/v1/train_jobs", headers=headers).json["train_jobs"] == []  # nothing half-made
    accepted = create(gpus)
    assert accepted.status_code == 201, accepted.json
    assert accepted.json["budget"]["GPU_COUNT"] == gpus


def test_what_the_platform_offers_comes_from_its_setting_or_its_kubernetes_pods(tmp_path: Path) -> None:
    assert Settings.from_env(environ={"BAOBAB_GPUS": "3"}, home=tmp_path).gpus_offered() == 3
    pods = {
        "BAOBAB_K8S_GPUS_PER_POD": "2",
        "BAOBAB_K8S_MAX_GPU_PODS": "4",
        "BAOBAB_GPUS": "0",
        "BAOBAB_BROKER_URL": "redis://127.0.0.1:6379/0",
    }
    on_kubernetes = Settings.from_env(environ=pods, home=tmp_path, executor=Executor.KUBERNETES)
    assert on_kubernetes.gpus_offered() == 8  # the API's own machine has none; its pods do
    with pytest.raises(Exception, match="BAOBAB_GPUS"):
        Settings.from_env(environ={"BAOBAB_GPUS": "-1"}, home=tmp_path)


@pytest.mark.parametrize(("visible", "count"), [("0,1", 2), ("", 0), ("-1", 0), ("GPU-5d2c,GPU-77aa,GPU-1f", 3)])
def test_the_default_counts_the_devices_cuda_would_show(
    monkeypatch: pytest.MonkeyPatch, visible: str, count: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _default_gpus() == count


GPU_BOX = Inventory(slots=1, cores=8, memory_mb=16_000, gpus=(Gpu(0, "H200", 143_771),))
CPU_BOX = Inventory(slots=4, cores=4, memory_mb=32_000)


def _job(client: FlaskClient, headers: dict[str, str], app: Flask, user: dict[str, Any], **fields: Any) -> Any:
    data = upload_dataset(client, headers)
    model = add_model(app.extensions["baobab"].engine, user["id"])
    budget = {"MODEL_TRIAL_COUNT": 2, "GPU_COUNT": fields.pop("gpus", 0)}
    body = job_body(data, data, [model], budget=budget, options=fields)
    return client.post("/api/v1/train_jobs", json=body, headers=headers)


@pytest.mark.parametrize("settings", [{"gpus": 0}], indirect=True)
def test_what_the_live_workers_have_is_what_a_job_may_ask_for(
    app: Flask, client: FlaskClient, add_user: AddUser, settings: Settings
) -> None:
    user, headers = add_user(UserRole.APP_DEVELOPER)
    with session_scope(app.extensions["baobab"].engine) as session:
        report_workers(session, {"gpu@a": GPU_BOX, "cpu@b": CPU_BOX}, datetime.now(UTC))
        report_workers(session, {"gone@c": Inventory(1, 64, 512_000)}, datetime.now(UTC) - timedelta(hours=1))

    refusals = {
        "budget.GPU_COUNT": ({"gpus": 2}, "budget.GPU_COUNT is 2, but this platform has 1 GPU (live workers "),
        "options.resources.memory_mb": (
            {"resources": {"memory_mb": 40_000}},
            "options.resources.memory_mb is 40000, but the largest worker machine has 32000 MiB (live workers ",
        ),
        "options.resources.threads": (
            {"resources": {"threads": 9}},
            "options.resources.threads is 9, but the largest worker machine has 8 cores (live workers ",
        ),
    }
    for field, (fields, message) in refusals.items():
        refused = _job(client, headers, app, user, **fields)
        assert refused.status_code == 400, refused.json
        assert refused.json["error"]["field"] == field
        text = refused.json["error"]["message"]
        assert text.startswith(message), text
        # what the cluster offers is named, machine by machine; a worker silent for an hour is not
        assert "cpu@b: 4 cores, 32000 MiB, no GPUs, 4 slots; gpu@a: 8 cores, 16000 MiB, 1 GPU, 1 slot" in text
        assert "gone@c" not in text
    assert client.get("/api/v1/train_jobs", headers=headers).json["train_jobs"] == []  # nothing half-made

    accepted = _job(client, headers, app, user, gpus=1, resources={"threads": 8, "memory_mb": 32_000})
    assert accepted.status_code == 201, accepted.json
    assert accepted.json["options"]["resources"] == {"threads": 8, "memory_mb": 32_000, "gpu_share": "off"}


@pytest.mark.parametrize(
    "resources",
    [{"threads": 0}, {"memory_mb": 100}, {"gpus": 1}, {"threads": "two"}, {"gpu_share": "always"}, {"gpu_share": 4}],
)
def test_a_resource_request_out_of_bounds_is_refused_by_name(
    app: Flask, client: FlaskClient, add_user: AddUser, resources: dict[str, Any]
) -> None:
    user, headers = add_user(UserRole.APP_DEVELOPER)
    refused = _job(client, headers, app, user, resources=resources)
    assert refused.status_code == 400, refused.json
    assert refused.json["error"]["field"] == f"options.resources.{next(iter(resources))}"
    if "gpu_share" in resources:
        assert "must be 'off' or 'auto'" in refused.json["error"]["message"], refused.json


def test_a_gpu_job_may_ask_for_its_gpus_to_be_shared(app: Flask, client: FlaskClient, add_user: AddUser) -> None:
    engine = app.extensions["baobab"].engine
    with session_scope(engine) as session:
        report_workers(session, {"gpu@a": GPU_BOX}, datetime.now(UTC))
    user, headers = add_user(UserRole.APP_DEVELOPER)
    accepted = _job(client, headers, app, user, gpus=1, resources={"gpu_share": "auto"})
    assert accepted.status_code == 201, accepted.json
    assert accepted.json["options"]["resources"]["gpu_share"] == "auto"
    assert accepted.json["gpu_share"] is None  # nothing decided before a trial measured

    refused = _job(client, headers, app, user, gpus=0, resources={"gpu_share": "auto"})
    assert refused.status_code == 400 and refused.json["error"]["field"] == "options.resources.gpu_share"
    assert "budget.GPU_COUNT is 0" in refused.json["error"]["message"], refused.json


@pytest.mark.parametrize("executor", [Executor.DOCKER, Executor.KUBERNETES])
def test_the_pool_executors_offer_what_their_settings_say_whatever_runs_now(
    app: Flask, settings: Settings, executor: Executor
) -> None:
    engine = app.extensions["baobab"].engine
    with session_scope(engine) as session:  # one job's worker container runs now; more may start
        report_workers(session, {"worker-1@c": GPU_BOX}, datetime.now(UTC))
    pool = dataclasses.replace(settings, executor=executor, broker_url="redis://127.0.0.1:6379/0", gpus=3)
    with session_scope(engine) as session:
        assert cluster_offer(session, pool) == ClusterOffer(gpus=pool.gpus_offered())  # cores, memory: not checked
        assert cluster_offer(session, settings).workers == {"worker-1@c": GPU_BOX}  # the local executor's view
