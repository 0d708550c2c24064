"""The docker executor against a real dockerd (skipped, with the reason, where none answers).

Nothing can be pulled here, so the containers run a stand-in image built from a local base
(``DOCKER_BASE_IMAGE``, made by ``docker/base.sh``):
its entrypoint sleeps, whatever ``baobab ...`` arguments the executor passes. What is
checked is what dockerd was asked for: labels, command, limits, mounts, network, GPUs.
A probe image, laid out as the worker image is (``/data`` its user's), reports from inside
what a process there can do: who it is, where it can write, which capabilities it holds.
"""

from __future__ import annotations

import dataclasses
import io
import json
import uuid

import docker
import pytest

from baobab import Settings
from baobab.store import JobStatus
from baobab.testing import missing_part, wait_until
from baobab.worker._docker import JOB_LABEL, KIND_LABEL, SCOPE_LABEL, DockerPool, DockerPoolConfig
from baobab.worker._pool import Unit

STAND_IN = "baobab-test-stand-in:latest"
PROBE = "baobab-test-probe:latest"
#: What the probe reports, one ``what=outcome`` line each, then ``probed``; then it sleeps as a worker would.
PROBE_SCRIPT = r"""
echo "uid=$(id -u)"
for place in / /etc /opt "$BAOBAB_HOME" /tmp; do
    if touch "$place/probe" 2>/dev/null; then echo "write $place=ok"; else echo "write $place=refused"; fi
done
grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -d ' \t' | tr : =
echo probed
exec sleep 600
"""


@pytest.fixture(scope="module")
def engine_client(docker_client, docker_base_image):
    dockerfile = f'FROM {docker_base_image}\nENTRYPOINT ["/bin/sh", "-c", "exec sleep 600", "baobab"]\n'
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=STAND_IN, rm=True)
    return docker_client


@pytest.fixture(scope="module")
def probe_image(docker_client, docker_base_image):
    """The base image laid out as the worker image (``/data`` owned by 10001), running :data:`PROBE_SCRIPT`."""
    dockerfile = (
        f"FROM {docker_base_image}\n"
        "RUN mkdir -p /data/artifacts && chown -R 10001:10001 /data\n"
        "ENV BAOBAB_HOME=/data\n"
        f'ENTRYPOINT ["/bin/sh", "-c", {json.dumps(PROBE_SCRIPT)}, "baobab"]\n'
    )
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=PROBE, rm=True)
    return PROBE


@pytest.fixture
def docker_pool(engine_client, jobs):
    scope = f"deploy-test-{uuid.uuid4().hex[:8]}"
    network = engine_client.networks.create(scope)
    volume = engine_client.volumes.create(scope)
    config = DockerPoolConfig(
        scope=scope,
        worker_image=STAND_IN,
        network=scope,
        artifacts_volume=scope,
        env={"BAOBAB_BROKER_URL": "redis://redis:6379/0", "BAOBAB_API_URL": "http://api:8100"},
        predictor_env={"BAOBAB_DATABASE_URL": "postgresql+psycopg2://db/baobab"},
        cpus_per_slot=0.5,
        memory_per_slot="256m",
    )
    pool = DockerPool(jobs.engine, engine_client, config, cpu_slots=2)
    yield pool
    pool.remove_all()
    network.remove()
    volume.remove(force=True)


def test_a_worker_container_per_cpu_job_with_labels_limits_volume_and_network(docker_pool, jobs):
    job = jobs.train(gpus=0)
    docker_pool.reconcile()
    running = docker_pool.running()
    assert set(running) == {f"worker-{job}"}
    container = running[f"worker-{job}"]
    container.reload()
    attrs = container.attrs
    assert container.status == "running"
    assert container.labels[SCOPE_LABEL] == docker_pool.pool.scope
    assert (container.labels[KIND_LABEL], container.labels[JOB_LABEL]) == ("worker", str(job))
    assert attrs["Args"][-7:] == [
        "worker",
        "--slots",
        "2",
        "--queues",
        f"baobab.job.{job}",
        "--name",
        f"worker@{container.name}",
    ]
    assert attrs["HostConfig"]["NanoCpus"] == 1_000_000_000  # 2 slots x 0.5 CPU
    assert attrs["HostConfig"]["Memory"] == 512 * 2**20
    mounts = {m["Destination"]: m["Name"] for m in attrs["Mounts"]}
    assert mounts.keys() == {"/data/artifacts", "/data"} and mounts["/data/artifacts"] == docker_pool.pool.scope
    assert set(attrs["NetworkSettings"]["Networks"]) == {docker_pool.pool.scope}
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["BAOBAB_ARTIFACTS_URL"] == "/data/artifacts"
    assert "BAOBAB_DATABASE_URL" not in env  # workers never hold the database URL

    docker_pool.reconcile()  # converged: nothing new
    assert docker_pool.running()[f"worker-{job}"].id == container.id

    jobs.end_train(job, JobStatus.STOPPED)
    docker_pool.reconcile()
    assert docker_pool.running() == {}


def test_a_job_asking_for_more_than_a_slot_gets_a_container_sized_by_its_launches(docker_pool, jobs):
    job = jobs.train(gpus=0, options={"resources": {"threads": 1, "memory_mb": 1024}})
    docker_pool.reconcile()
    container = docker_pool.running()[f"worker-{job}"]
    container.reload()
    host = container.attrs["HostConfig"]
    assert host["NanoCpus"] == 2_000_000_000  # 2 slots x 1 thread, above the pool's 0.5 CPU a slot
    assert host["Memory"] == 2 * 1024 * 2**20  # 2 slots x 1024 MiB, above the pool's 256m a slot


@pytest.mark.parametrize("kind", ["worker", "predictor"])
def test_containers_run_non_root_on_a_read_only_root_with_no_capabilities(docker_pool, probe_image, jobs, kind):
    """Templates run in these containers: what a process there finds, asked from inside by the probe."""
    probed = dataclasses.replace(docker_pool.pool, worker_image=probe_image)
    pool = DockerPool(jobs.engine, docker_pool.client, probed, cpu_slots=1)
    job = jobs.train() if kind == "worker" else jobs.serve(jobs.train(status=JobStatus.COMPLETED))
    container = pool.start(Unit(kind, job, gpus=0, slots=1))
    logs = wait_until(
        lambda: "probed" in (text := container.logs().decode()) and text, timeout=60, what="the probe's report"
    )
    report = dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)
    assert report["uid"] == "10001"
    assert (report["write /"], report["write /etc"], report["write /opt"]) == ("refused",) * 3  # read-only root
    assert (report["write /data"], report["write /tmp"]) == ("ok", "ok")  # its home and /tmp, nothing else
    zero = "0" * 16
    assert (report["CapPrm"], report["CapEff"], report["CapBnd"]) == (zero, zero, zero)  # every capability dropped
    assert report["NoNewPrivs"] == "1"  # a setuid program cannot raise them again
    container.reload()
    host = container.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"] and container.attrs["Config"]["User"] == "10001:10001"
    (home,) = [m for m in container.attrs["Mounts"] if m["Destination"] == "/data"]
    assert home["Type"] == "volume" and home["RW"] is True
    volumes = {m["Name"] for m in container.attrs["Mounts"] if m["Type"] == "volume"}
    pool.remove_all()  # its home volume goes with it
    left = {v.name for v in docker_pool.client.volumes.list()}
    assert home["Name"] not in left and docker_pool.pool.scope in volumes  # the artifacts volume stays


@pytest.mark.parametrize("user", ["0", "0:0", "root", "root:baobab"])
def test_a_root_user_is_refused_naming_the_setting(tmp_path, user):
    settings = Settings.from_env(
        {}, home=tmp_path, executor="docker", broker_url="redis://r/0", api_url="http://a", docker_user=user
    )
    with pytest.raises(ValueError, match=rf"BAOBAB_DOCKER_USER='{user}' would run templates as root"):
        DockerPoolConfig.from_settings(settings)


def test_a_predictor_per_inference_job(docker_pool, jobs):
    served = jobs.serve(jobs.train(status=JobStatus.COMPLETED))
    docker_pool.reconcile()
    container = docker_pool.running()[f"predictor-{served}"]
    attrs = container.attrs
    # its own job only, found by the API at its name on the pool's network
    assert attrs["Args"][-5:] == ["0.0.0.0", "--job", str(served), "--advertise", container.name]
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["BAOBAB_DATABASE_URL"] == "postgresql+psycopg2://db/baobab"
    jobs.end_inference(served)
    docker_pool.reconcile()
    assert docker_pool.running() == {}


def test_leftovers_of_a_crashed_manager_are_found_by_labels_and_dead_ones_replaced(docker_pool, jobs, engine_client):
    ended, alive = jobs.train(), jobs.train()
    docker_pool.reconcile()
    first = docker_pool.running()[f"worker-{alive}"]
    jobs.end_train(ended)
    first.kill()  # the worker died while no manager was looking
    fresh = DockerPool(jobs.engine, engine_client, docker_pool.pool, cpu_slots=2)
    fresh.reconcile()
    running = fresh.running()
    assert set(running) == {f"worker-{alive}"}
    assert running[f"worker-{alive}"].id != first.id and running[f"worker-{alive}"].status == "running"


def test_two_advisors_racing_to_the_same_container_both_carry_on(docker_pool, jobs, engine_client, monkeypatch):
    """Every advisor runs the manager: one that listed before the other started a container finds its name taken."""
    job = jobs.train()
    docker_pool.reconcile()
    late = DockerPool(jobs.engine, engine_client, docker_pool.pool, cpu_slots=2)
    monkeypatch.setattr(late, "running", lambda: {})
    late.reconcile()  # dockerd answers 409 for the name: not an error
    assert [c.name for c in docker_pool.running().values()] == [f"{docker_pool.pool.scope}-worker-{job}"]


def test_gpu_jobs_ask_dockerd_for_gpus(docker_pool, jobs):
    unit = Unit("worker", jobs.train(gpus=2), gpus=2, slots=2)
    try:
        container = docker_pool.start(unit)
    except docker.errors.APIError as e:  # no NVIDIA runtime on this host: dockerd says what it was asked
        assert "capabilities: [[gpu]]" in str(e)
        return
    requests = container.attrs["HostConfig"]["DeviceRequests"]
    assert requests[0]["Count"] == 2 and requests[0]["Capabilities"] == [["gpu"]]
    assert container.attrs["Args"][1:5] == ["--gpus", "0,1", "--queues", f"baobab.job.{unit.job_id}"]


@pytest.mark.parametrize(("image", "has_torch"), [("baobab-api:0.1.0", False), ("baobab-worker:0.1.0", True)])
def test_built_images_run_baobab_as_non_root(engine_client, docker_base_image, image, has_torch):
    try:
        engine_client.images.get(image)
    except docker.errors.ImageNotFound:
        missing_part(f"{image} is not built here: `make images BASE_IMAGE={docker_base_image}` builds it")
    script = "import os, importlib.util; print(os.getuid(), importlib.util.find_spec('torch') is not None)"
    out = engine_client.containers.run(image, ["-c", script], entrypoint="python3", remove=True)
    assert out.decode().split() == ["10001", str(has_torch)]
    usage = engine_client.containers.run(image, ["--help"], remove=True).decode()
    assert "api" in usage and "worker" in usage and "advisor" in usage


def test_the_pool_config_comes_from_the_advisors_settings(tmp_path):
    """Workers get what they report with and never the database or the secret; predictors get both."""
    settings = Settings.from_env(
        {},
        home=tmp_path,
        executor="docker",
        database_url="postgresql+psycopg2://baobab:dbpw@db/baobab",
        broker_url="redis://redis:6379/0",
        api_url="http://api:8100",
        secret_key="s3cret",
        docker_network="baobab-net",
        docker_artifacts="baobab-artifacts",
        docker_scope="team-a",
        docker_memory_per_slot="2g",
    )
    config = DockerPoolConfig.from_settings(settings)
    assert (config.scope, config.network, config.artifacts_volume) == ("team-a", "baobab-net", "baobab-artifacts")
    assert config.worker_image == "baobab-worker:0.1.0" and config.memory_per_slot == "2g"
    assert config.env["BAOBAB_BROKER_URL"] == "redis://redis:6379/0"
    assert config.env["BAOBAB_API_URL"] == "http://api:8100"
    assert config.env["BAOBAB_EXECUTOR"] == "celery"
    assert not {"BAOBAB_DATABASE_URL", "BAOBAB_SECRET_KEY", "BAOBAB_ARTIFACTS_URL"} & set(config.env)
    assert config.predictor_env["BAOBAB_DATABASE_URL"] == "postgresql+psycopg2://baobab:dbpw@db/baobab"
    assert config.predictor_env["BAOBAB_SECRET_KEY"] == "s3cret"

    # without a volume, the containers use the shared artifact URL as it is
    shared = Settings.from_env({}, home=tmp_path, executor="docker", broker_url="redis://r/0", api_url="http://a")
    assert DockerPoolConfig.from_settings(shared).env["BAOBAB_ARTIFACTS_URL"] == shared.artifacts_url
    no_api = Settings.from_env({}, home=tmp_path, executor="docker", broker_url="redis://r/0")
    with pytest.raises(ValueError, match="BAOBAB_EXECUTOR=docker needs BAOBAB_API_URL"):
        DockerPoolConfig.from_settings(no_api)
