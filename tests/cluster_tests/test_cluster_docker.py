"""Train → serve → predict with ``BAOBAB_EXECUTOR=docker``: the advisor runs the workers and the
predictor as containers of the worker image through a real dockerd.

The API and the advisor run on this machine (as in :mod:`test_cluster_e2e`); nothing else
is started by the test. The containers share the host's network (``host``), where
PostgreSQL, Redis and the API listen on loopback, and mount the API's artifact folder.
Skipped, with the reason, where no Docker engine or no worker image is here
(``make docker-engine`` starts one and builds the images where dockerd can run).

The containers run as the images' user (10001), while the API here may run as root: the
services are started with umask 0, so what the API writes into the shared artifact folder
(a host folder mounted in the containers) is writable by the containers' user too.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import docker
import numpy as np
import pandas as pd
import pytest
from cluster_jobs import start_breast_cancer_job
from conftest import StartCluster

from baobab.testing import missing_part, wait_until
from baobab.worker._docker import JOB_LABEL, KIND_LABEL, SCOPE_LABEL

WORKER_IMAGE = "baobab-worker:0.1.0"
TRIALS = 4
PROBE = Path(__file__).parent / "templates" / "container_probe.py"


@pytest.fixture
def worker_image(docker_client) -> str:
    try:
        docker_client.images.get(WORKER_IMAGE)
    except docker.errors.ImageNotFound:
        missing_part(f"{WORKER_IMAGE} is not built here: `make docker-engine` builds it where dockerd runs")
    return WORKER_IMAGE


@pytest.fixture
def scope(docker_client):
    """A scope of this test's own; whatever containers it leaves are removed."""
    name = f"baobab-test-{uuid.uuid4().hex[:8]}"
    yield name
    for container in docker_client.containers.list(all=True, filters={"label": f"{SCOPE_LABEL}={name}"}):
        try:
            container.remove(force=True, v=True)  # its home volume too
        except docker.errors.NotFound:
            pass  # the executor removed it meanwhile
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: the executor is removing it right now
                raise


@pytest.fixture
def docker_cluster(start_cluster: StartCluster, worker_image: str, scope: str, tmp_path: Path):
    """Starts a cluster whose advisor runs the workers and predictors as containers of ``worker_image``."""
    shared = tmp_path / "cluster" / "shared-artifacts"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    umask = os.umask(0)  # inherited by the services (module docstring)
    try:
        yield lambda: start_cluster(
            workers=0,
            executor="docker",
            settings={
                "BAOBAB_DOCKER_IMAGE": worker_image,
                "BAOBAB_DOCKER_NETWORK": "host",
                "BAOBAB_DOCKER_ARTIFACTS": str(shared),
                "BAOBAB_DOCKER_SCOPE": scope,
                "BAOBAB_DOCKER_MEMORY_PER_SLOT": "2g",
            },
        )
    finally:
        os.umask(umask)


def _containers(client, scope: str) -> dict[tuple[str, str], object]:
    """(kind, job id) -> container, for every container of ``scope``."""
    found = client.containers.list(all=True, filters={"label": f"{SCOPE_LABEL}={scope}"})
    return {(c.labels[KIND_LABEL], c.labels[JOB_LABEL]): c for c in found}


def test_train_serve_predict_in_worker_and_predictor_containers(
    docker_cluster, breast_cancer: Path, docker_client, scope: str
) -> None:
    cluster = docker_cluster()
    client = cluster.client
    job = start_breast_cancer_job(cluster, breast_cancer, trials=TRIALS)
    job_id = str(job["id"])
    worker = wait_until(
        lambda: _containers(docker_client, scope).get(("worker", job_id)),
        timeout=60,
        what="the worker container",
        interval=0.5,
    )
    assert worker.attrs["HostConfig"]["NetworkMode"] == "host"
    assert worker.attrs["Args"][-2:] == ["--metrics-port", "0"]  # the host's one port space: no metrics port each
    assert worker.attrs["HostConfig"]["NanoCpus"] == 2 * 10**9  # BAOBAB_CPU_SLOTS=2 slots of 1 CPU

    job = client.wait_for_train_job("bc", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    assert job["trial_counts"]["COMPLETED"] == TRIALS and job["best_score"] > 0.9
    trials = client.get_trials("bc", job["app_version"])["trials"]
    in_container = f"worker@{scope}-worker-{job_id}"  # the node name the pool gave the container
    assert all(t["worker"].startswith(in_container) for t in trials), [t["worker"] for t in trials]
    # the job is over: its worker container goes
    wait_until(
        lambda: ("worker", job_id) not in _containers(docker_client, scope),
        timeout=30,
        interval=0.5,
        what="the finished job's worker container to be removed",
    )

    inference = client.create_inference_job("bc", job["app_version"], k=2)
    served = client.wait_for_inference_job(inference["id"], timeout=180)
    assert served["status"] == "RUNNING", served
    predictor = _containers(docker_client, scope)[("predictor", str(inference["id"]))]
    assert predictor.attrs["Args"][-2:] == ["--job", str(inference["id"])]

    test = pd.read_csv(breast_cancer / "test.csv")
    queries = test.drop(columns="target").to_numpy().tolist()
    answer = client.predict(queries, predictor_url=served["predictor_url"], api_key=inference["api_key"])
    accuracy = float(np.mean(np.asarray(answer["predictions"]) == test["target"].to_numpy()))
    assert accuracy > 0.9

    client.stop_inference_job(inference["id"])
    wait_until(
        lambda: not _containers(docker_client, scope),
        timeout=30,
        interval=0.5,
        what="the stopped inference job's predictor container to be removed",
    )


def test_a_trial_in_a_worker_container_is_not_root_and_can_write_neither_the_root_nor_the_platform(
    docker_cluster, breast_cancer: Path, docker_client, scope: str
) -> None:
    cluster = docker_cluster()
    client = cluster.client
    data = client.create_dataset("probe data", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(PROBE, task="TABULAR_REGRESSION", class_name="ContainerProbe")
    job = client.create_train_job(
        "probe",
        "TABULAR_REGRESSION",
        train_dataset_id=data["id"],
        val_dataset_id=data["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
    )
    worker = wait_until(
        lambda: _containers(docker_client, scope).get(("worker", str(job["id"]))), timeout=60, what="the worker"
    )
    host = worker.attrs["HostConfig"]
    assert (host["ReadonlyRootfs"], host["CapDrop"], host["SecurityOpt"]) == (
        True,
        ["ALL"],
        ["no-new-privileges:true"],
    )
    job = client.wait_for_train_job("probe", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("probe", job["app_version"])["trials"]
    assert trial["worker"].startswith(f"worker@{scope}-worker-")  # it ran in the container
    found = dict(
        entry["line"].removeprefix("probe ").split(": ", 1)
        for entry in client.get_trial_logs(trial["id"])
        if entry["line"].startswith("probe ")
    )
    assert found["uid"] != "0", found
    assert found["write /"] == found["write /opt/baobab"] == "EROFS", found  # the root and the platform's code
    # its temporary files go to its own folder (TMPDIR); /tmp, which the container's tmpfs makes writable, is closed
    # to templates where Landlock confines them (baobab/_sandbox.py), which this test does not require
    assert found["write TMPDIR"] == "ok", found
    assert int(found["CapEff"], 16) == int(found["CapBnd"], 16) == 0, found  # no capability, none to regain
    assert found["NoNewPrivs"] == "1", found
