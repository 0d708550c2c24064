"""``BAOBAB_EXECUTOR=docker``: worker and predictor containers on one Docker host, one set
per job, started and removed through the Docker API (the official ``docker`` client).

A pool manager on top of the Celery executor: trials still travel through Celery, and
this manager keeps one worker container per active train job (``baobab worker --gpus``
with a GPU device request for ``GPU_COUNT`` GPUs, or ``--slots`` with a CPU limit), which
takes trials from that job's own queue only, and one predictor container per served
inference job (``baobab predictor --job``). Every container carries labels naming the
manager's ``scope`` and the job, so what a crashed manager left behind is found and removed
by the next reconcile: the store says what should run, the labels say what does.

Templates run in these containers (trials in the workers, inference workers in the
predictors), so every container is made as small a place as Docker allows: a non-root
user (root is refused), a read-only root filesystem with two writable places, a ``/tmp``
tmpfs and an anonymous volume at ``BAOBAB_HOME`` (the caches, logs and trial folders; it
goes with the container), every capability dropped, and ``no-new-privileges`` (a setuid
program cannot raise them again).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import docker
from docker.errors import APIError, NotFound
from docker.types import DeviceRequest, Mount
from sqlalchemy.engine import Engine

from baobab.worker._celery import job_queue
from baobab.worker._pool import Unit, plan, run_reconciler

if TYPE_CHECKING:
    from baobab import Settings

__all__ = ["DockerPool", "DockerPoolConfig"]

logger = logging.getLogger(__name__)

#: What a worker container is told (its Settings) and what a predictor container is told besides.
_WORKER_SETTINGS = ("broker_url", "api_url", "heartbeat_s", "heartbeat_timeout_s", "redelivery_s", "trial_timeout_s")
_PREDICTOR_SETTINGS = ("database_url", "secret_key", "mode")
#: The network where containers share the host's interfaces (they reach its loopback; no name of their own).
HOST_NETWORK = "host"

#: Who the containers run as unless ``BAOBAB_DOCKER_USER`` says: the images' own user.
NON_ROOT_USER = "10001:10001"
#: The writable places of a container's read-only root: ``/tmp`` is a tmpfs (mode 1777, as a /tmp is).
TMPFS = {"/tmp": "rw,nosuid,nodev,mode=1777"}

SCOPE_LABEL = "io.baobab.scope"
KIND_LABEL = "io.baobab.kind"
JOB_LABEL = "io.baobab.job"


@dataclass(frozen=True)
class DockerPoolConfig:
    """How the containers are made.

    Attributes:
        scope: Names this platform on the host (a label); two platforms on one host
            never touch each other's containers.
        worker_image: The worker image (``make images``), used for workers and predictors.
        network: The Docker network where the broker, the database and the API are reachable.
        artifacts_volume: A volume name or host folder mounted at ``artifacts_path``.
        home_path: ``BAOBAB_HOME`` in the containers: an anonymous volume, removed with its container
            (the images' own ``/data``, whose owner the volume takes).
        user: ``uid:gid`` the containers run as, never root; a host folder as ``artifacts_volume``
            must be writable by it.
        env: Settings given to every container (``BAOBAB_BROKER_URL``, ``BAOBAB_API_URL``, ...);
            predictors get ``predictor_env`` on top (database, secret), workers never do.
        cpus_per_slot, memory_per_slot: Limits per trial slot of a CPU worker (and per GPU).
    """

    scope: str
    worker_image: str
    network: str | None = None
    artifacts_volume: str | None = None
    artifacts_path: str = "/data/artifacts"
    home_path: str = "/data"
    user: str = NON_ROOT_USER
    env: dict[str, str] = field(default_factory=dict)
    predictor_env: dict[str, str] = field(default_factory=dict)
    cpus_per_slot: float = 1.0
    memory_per_slot: str = "4g"

    def __post_init__(self) -> None:
        if self.user.split(":", 1)[0] in ("0", "root"):
            raise ValueError(
                f"BAOBAB_DOCKER_USER={self.user!r} would run templates as root in the containers; "
                f"give a non-root uid:gid (the images' own is {NON_ROOT_USER}) that can write the mounted artifacts"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> DockerPoolConfig:
        """The advisor's ``BAOBAB_DOCKER_*`` settings; containers get the settings their command needs.

        Workers get the broker, the API and the timing settings, never the database or the
        secret key; predictors get those too (they read the job from the store). With
        ``BAOBAB_DOCKER_ARTIFACTS`` the artifacts are that volume, else the shared URL.
        """
        if settings.api_url is None:
            raise ValueError("BAOBAB_EXECUTOR=docker needs BAOBAB_API_URL: the API as the worker containers reach it")
        env = settings.to_env(_WORKER_SETTINGS)
        env["BAOBAB_EXECUTOR"] = "celery"  # inside a container, a worker is a plain Celery worker
        if settings.docker_artifacts is None:
            env["BAOBAB_ARTIFACTS_URL"] = settings.artifacts_url
        return cls(
            scope=settings.docker_scope,
            worker_image=settings.docker_image,
            network=settings.docker_network,
            artifacts_volume=settings.docker_artifacts,
            user=settings.docker_user or NON_ROOT_USER,
            env=env,
            predictor_env=settings.to_env(_PREDICTOR_SETTINGS),
            cpus_per_slot=settings.docker_cpus_per_slot,
            memory_per_slot=settings.docker_memory_per_slot,
        )


class DockerPool:
    """Reconciles the containers on a Docker host with the active jobs (see the module doc)."""

    def __init__(self, engine: Engine, client: docker.DockerClient, pool: DockerPoolConfig, *, cpu_slots: int) -> None:
        self.engine = engine
        self.client = client
        self.pool = pool
        self.cpu_slots = cpu_slots

    def container_name(self, unit: Unit) -> str:
        return f"{self.pool.scope}-{unit.name}"

    def running(self) -> dict[str, object]:
        """Unit name -> container, for every container of this scope (running or not)."""
        found = {}
        for container in self.client.containers.list(all=True, filters={"label": f"{SCOPE_LABEL}={self.pool.scope}"}):
            labels = container.labels
            if labels.get(SCOPE_LABEL) == self.pool.scope and KIND_LABEL in labels and JOB_LABEL in labels:
                found[f"{labels[KIND_LABEL]}-{labels[JOB_LABEL]}"] = container
        return found

    def reconcile(self) -> dict[str, Unit]:
        """One round: start what active jobs lack, remove what ended jobs (or a crash) left, restart the dead."""
        units = plan(self.engine, cpu_slots=self.cpu_slots)
        running = self.running()
        for name, container in running.items():
            if name not in units:
                logger.info("docker pool: removing %s (its job ended)", container.name)
                self._remove(container)
            elif container.status in ("created", "exited", "dead"):  # never started, or died
                logger.warning("docker pool: %s is %s; starting a new one", container.name, container.status)
                self._remove(container)
                self.start(units[name])
        for name, unit in units.items():
            if name not in running:
                self.start(unit)
        return units

    def run(self, stop: threading.Event, *, interval_s: float = 5.0) -> None:
        """Reconciles until ``stop``; then removes nothing (containers outlive a restart of the manager)."""
        run_reconciler(self.reconcile, stop, interval_s=interval_s, what="docker pool")

    def remove_all(self) -> int:
        """Removes every container of this scope (the platform is shut down for good); returns how many."""
        containers = list(self.running().values())
        for container in containers:
            self._remove(container)
        return len(containers)

    def start(self, unit: Unit):
        """Starts the container of one unit: labels, limits, GPUs, the artifacts, the network, the confinement."""
        pool = self.pool
        labels = {SCOPE_LABEL: pool.scope, KIND_LABEL: unit.kind, JOB_LABEL: str(unit.job_id)}
        env = {**pool.env, "BAOBAB_HOME": pool.home_path}
        volumes = {}
        if pool.artifacts_volume:
            volumes[pool.artifacts_volume] = {"bind": pool.artifacts_path, "mode": "rw"}
            env.setdefault("BAOBAB_ARTIFACTS_URL", pool.artifacts_path)
        device_requests = []
        name = self.container_name(unit)
        if unit.kind == "predictor":
            env.update(pool.predictor_env)
            command = ["predictor", "--host", "0.0.0.0", "--job", str(unit.job_id)]
            if pool.network != HOST_NETWORK:  # the API finds the container by its name on the network
                command += ["--advertise", name]
            slots = 1
        else:
            if unit.gpus:
                # inside the container the requested GPUs are numbered from 0
                command = ["worker", "--gpus", ",".join(str(i) for i in range(unit.gpus))]
                device_requests = [DeviceRequest(count=unit.gpus, capabilities=[["gpu"]])]
            else:
                command = ["worker", "--slots", str(unit.slots)]
            # the job's own queue (CeleryExecutor's job_queues): removing this container touches no other job
            command += ["--queues", job_queue(unit.job_id), "--name", f"worker@{name}"]
            if pool.network == HOST_NETWORK:  # one port space for every container: they cannot all take the default
                command += ["--metrics-port", "0"]
            slots = unit.slots
        logger.info("docker pool: starting %s (%s)", name, " ".join(command))
        try:
            return self.client.containers.run(
                pool.worker_image,
                command,
                name=name,
                detach=True,
                labels=labels,
                environment=env,
                volumes=volumes,
                network=pool.network,
                user=pool.user,
                read_only=True,
                tmpfs=TMPFS,
                mounts=[Mount(target=pool.home_path, source=None, type="volume")],
                cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                device_requests=device_requests,
                nano_cpus=int(max(pool.cpus_per_slot, unit.threads or 0) * slots * 1e9),
                mem_limit=_slot_memory(pool.memory_per_slot, unit.memory_mb, slots),
                restart_policy={"Name": "no"},
            )
        except APIError as e:
            if e.status_code != 409:
                raise
            # names are fixed per job: another advisor (each runs this manager) started it first
            logger.info("docker pool: %s already exists", name)
            return None

    @staticmethod
    def _remove(container) -> None:
        try:
            # SIGKILL: Celery re-queues the trials it held (acks_late); v: its home volume goes with it
            container.remove(force=True, v=True)
        except NotFound:
            pass


def _slot_memory(size: str, memory_mb: int | None, n: int) -> int:
    """The bytes of ``n`` slots of ``size`` each (Docker's size strings: a number and b, k, m or g), or of
    ``memory_mb`` each where a job's launches ask for more than that."""
    unit = size[-1].lower() if size[-1].isalpha() else ""
    number = float(size[:-1] if unit else size) * {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit]
    return int(max(number, (memory_mb or 0) * 2**20) * n)
