"""A train job asks for at most the GPUs the platform has: ``budget.GPU_COUNT`` above them is a 400.

Before this check, a job asking for a GPU on a platform with none was accepted and trained on
the CPU without saying so. What the platform offers is ``BAOBAB_GPUS`` (by default the NVIDIA
devices the API's machine shows), or under the kubernetes executor what its GPU pods can add up to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import add_model, job_body, upload_dataset

from baobab import Settings
from baobab._settings import Executor, _default_gpus
from baobab.store import UserRole

AddUser = Callable[[UserRole], tuple[dict[str, Any], dict[str, str]]]


@pytest.fixture(params=[0, 2], ids=["no-gpu", "two-gpus"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return dataclasses.replace(settings, gpus=request.param)


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
