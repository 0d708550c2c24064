"""A cluster on loopback: ``baobab api``, ``advisor`` and ``worker`` processes on a real PostgreSQL and Redis.

Each test gets a PostgreSQL database and a Redis database number of its own (a RabbitMQ
virtual host, for the tests that ask for RabbitMQ as the broker). In CI (``CI`` set) an
unreachable Redis, RabbitMQ or PostgreSQL fails the tests; elsewhere they are skipped
with the reason. Timings are short (heartbeat 0.5 s, a trial stale after 3 s,
leases of 3 s, redelivery after 8 s) so that every fault is over within seconds.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import Engine, create_engine, text

from baobab.sdk import Client
from baobab.store import build_tabular
from baobab.testing import LocalCluster, missing_part

REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
RABBITMQ_HOST = os.environ.get("TEST_RABBITMQ_HOST", "127.0.0.1")
RABBITMQ_USER, RABBITMQ_PASSWORD = "guest", "guest"  # Debian's default user, allowed from loopback
ADMIN_EMAIL = "root@example.com"
ADMIN_PASSWORD = "root-password"
EXAMPLES = Path(__file__).parents[2] / "examples" / "models"
#: SlowScorer: trials that sleep ``train_args["sleep_s"]`` and score their knob.
SLOW_SCORER = Path(__file__).parents[1] / "platform_tests" / "templates" / "slow_scorer.py"
#: TinyTorch: a small TorchModel whose only searched knob is its learning rate; ``score()`` holds while
#: ``<signal_dir>/hold`` exists.
TINY_TORCH = Path(__file__).parents[1] / "worker_tests" / "templates" / "tiny_torch.py"
TIMINGS = {
    "BAOBAB_HEARTBEAT_S": "0.5",
    "BAOBAB_HEARTBEAT_TIMEOUT_S": "3",
    "BAOBAB_REDELIVERY_S": "8",
    "BAOBAB_LEASE_S": "3",
    "BAOBAB_CPU_SLOTS": "2",
}
# Redis database 0 is left to others; each test takes the next of 1..15.
_REDIS_DBS = itertools.cycle(range(1, 16))


@pytest.fixture
def redis_url() -> Iterator[str]:
    """An empty Redis database of this test's own."""
    db = next(_REDIS_DBS)
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_connect_timeout=2)
    try:
        client.flushdb()
    except redis.RedisError as e:
        missing_part(f"Redis at {REDIS_HOST}:{REDIS_PORT} cannot be reached: {e}")
    yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    try:
        client.flushdb()
    except redis.RedisError:
        pass  # a test that restarted Redis left it empty anyway
    client.close()


@pytest.fixture
def rabbitmq_url() -> Iterator[str]:
    """A virtual host of this test's own on the machine's RabbitMQ (made and dropped with ``rabbitmqctl``)."""
    vhost = f"baobab-{uuid.uuid4().hex[:8]}"

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60)

    try:
        made = ctl("add_vhost", vhost)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        missing_part(f"RabbitMQ cannot be managed here (rabbitmqctl: {e})")
    if made.returncode != 0:
        missing_part(f"RabbitMQ at {RABBITMQ_HOST}:5672 cannot be reached: {made.stderr.strip()}")
    ctl("set_permissions", "-p", vhost, RABBITMQ_USER, ".*", ".*", ".*")
    yield f"amqp://{RABBITMQ_USER}:{RABBITMQ_PASSWORD}@{RABBITMQ_HOST}:5672/{vhost}"
    ctl("delete_vhost", vhost)


@pytest.fixture
def postgres_url(_postgres_admin: Engine) -> Iterator[str]:
    """An empty PostgreSQL database of this test's own."""
    name = f"baobab_cluster_{uuid.uuid4().hex[:12]}"
    with _postgres_admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield _postgres_admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with _postgres_admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))


@dataclass
class Cluster:
    """A started :class:`LocalCluster`, an admin's client, and the database for looking behind the API."""

    services: LocalCluster
    client: Client
    db: Engine

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.db.connect() as connection:
            return list(connection.execute(text(sql), params))


StartCluster = Callable[..., Cluster]


@pytest.fixture
def start_cluster(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str, redis_url: str
) -> Iterator[StartCluster]:
    """Starts a cluster (``workers`` machines of ``slots`` each; Redis unless ``broker_url``); stopped after the test.

    The services' logs are printed when the test fails.
    """
    started: list[Cluster] = []

    def start(
        *,
        workers: int = 2,
        slots: int = 1,
        settings: dict[str, str] | None = None,
        executor: str = "celery",
        broker_url: str | None = None,
    ) -> Cluster:
        services = LocalCluster(
            tmp_path / "cluster",
            database_url=postgres_url,
            broker_url=broker_url or redis_url,
            workers=workers,
            slots=slots,
            executor=executor,
            settings={
                **TIMINGS,
                "BAOBAB_ADMIN_EMAIL": ADMIN_EMAIL,
                "BAOBAB_ADMIN_PASSWORD": ADMIN_PASSWORD,
                **(settings or {}),
            },
        )
        cluster = Cluster(services, Client(services.url), create_engine(postgres_url))
        started.append(cluster)
        services.start()
        cluster.client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
        return cluster

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for cluster in started:
        cluster.services.stop()
        cluster.db.dispose()
        if failed:
            print(cluster.services.logs())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


@pytest.fixture(scope="session")
def breast_cancer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("breast_cancer")
    build_tabular("breast_cancer", folder)
    return folder
