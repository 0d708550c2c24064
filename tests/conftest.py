"""Fixtures shared by every test package: an empty database on each backend, a Docker engine.

Each PostgreSQL test gets a database of its own (created from the server's
``TEST_POSTGRES_URL`` database, default ``test``, and dropped afterwards), so tests
never see each other's rows. In CI (``CI`` set) an unreachable PostgreSQL fails the
tests that need it; elsewhere they are skipped with the reason.

The container tests need a Docker engine (``make docker-engine`` starts one where it
can, as root) and images built from a local base; where there is none they fail in CI
(which starts one) and are skipped with the reason elsewhere.

A test that hands a template a file to create (a signal, a lock, a log of its calls) makes
it in ``signal_dir``, not ``tmp_path``: a confined template process writes only in its own
folder and under ``/dev`` (docs/security.md), and ``tmp_path`` lies in ``/tmp``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from baobab.testing import missing_part

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
#: Where confined template processes may create files that a test reads: POSIX shared memory's folder,
#: writable under /dev as multiprocessing and torch need it (baobab/_sandbox.py).
SHARED_MEMORY = Path("/dev/shm")


#: The marker of each fixture that needs a service of the machine (``make test-fast`` deselects them).
SERVICE_FIXTURES = {
    "_postgres_admin": "postgres",
    "redis_url": "redis",
    "rabbitmq_url": "rabbitmq",
    "docker_client": "docker",
    "chromium": "browser",
    "kube": "kubernetes",
}


#: The test folders, files and tests (node ids below ``tests/``) that start a platform, a predictor server, API
#: or worker processes, or fuzz the whole API: seconds each. They are ``slow``, so ``make test-fast`` (which
#: leaves ``slow`` out) stays under five minutes on a 2-core machine; ``make test`` runs them. Chosen from
#: ``--durations`` of the fast set.
SLOW_FILES = (
    "platform_tests/",
    "predictor_tests/test_autoscaling.py",
    "predictor_tests/test_fused_members.py",
    "predictor_tests/test_inference_supervisor.py",
    "predictor_tests/test_inference_worker.py",
    "predictor_tests/test_predictor_server.py",
    "predictor_tests/test_predictor_versions.py",
    "predictor_tests/test_request_logs_served.py",
    "worker_tests/test_confinement.py",
    "worker_tests/test_data_cache.py",
    "worker_tests/test_fused_trials.py",
    "worker_tests/test_local_executor.py",
    "worker_tests/test_trial_architecture.py",
    "worker_tests/test_trial_runner.py",
    "dev_tests/test_dev_runner.py",
    "admin_tests/test_auth.py::test_failed_logins_per_account_are_limited_across_api_processes",
    "admin_tests/test_model_endpoints.py",
    "admin_tests/test_schemathesis.py",
    "examples_tests/test_example_enas",
    "examples_tests/test_example_spaces.py",
    "sdk_tests/test_cli_platform.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks each test with the services its fixtures need, so no test file has to say it again, and the tests of
    :data:`SLOW_FILES` ``slow``.

    ``db_url``'s PostgreSQL case asks for its server at run time (``getfixturevalue``), so it is
    told by its parameter, which every fixture built on ``db_url`` carries along.
    """
    for item in items:
        if item.nodeid.removeprefix("tests/").startswith(SLOW_FILES):
            item.add_marker("slow")
        needed = {marker for name, marker in SERVICE_FIXTURES.items() if name in getattr(item, "fixturenames", ())}
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("db_url") == "postgresql":
            needed.add("postgres")
        for marker in sorted(needed):
            item.add_marker(marker)


#: scrypt's work factor for passwords hashed in a test's own process: the production one (2**15, about 0.1 s a
#: hash here) made password hashing a third of the API tests' time. The same code runs; the hash records its
#: factor, so what a test stores verifies. Tests marked ``production_password_cost`` keep the real factor.
TEST_SCRYPT_N = 2**10


@pytest.fixture(autouse=True)
def _cheap_password_hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("production_password_cost") is None:
        monkeypatch.setattr("baobab.admin._auth._N", TEST_SCRYPT_N)


@pytest.fixture(scope="session")
def _postgres_admin() -> Iterator[Engine]:
    """An AUTOCOMMIT engine on the server's test database, for CREATE/DROP DATABASE."""
    engine = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with engine.connect():
            pass
    except OperationalError as e:
        engine.dispose()
        missing_part(f"PostgreSQL at {engine.url.render_as_string(hide_password=True)} cannot be reached: {e.orig}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def signal_root() -> Iterator[Path]:
    """The folder of this session's :func:`signal_dir` folders (in ``/dev/shm``, where there is one), removed
    at its end; a module-scoped fixture makes its own in it with :func:`tempfile.mkdtemp`."""
    root = Path(tempfile.mkdtemp(prefix="baobab-tests-", dir=SHARED_MEMORY if SHARED_MEMORY.is_dir() else None))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def signal_dir(signal_root: Path) -> Path:
    """A new folder that this test and the template processes it starts can both create files in."""
    return Path(tempfile.mkdtemp(prefix="signals-", dir=signal_root))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'baobab.db'}"
        return
    admin: Engine = request.getfixturevalue("_postgres_admin")
    name = f"baobab_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))


#: The base image ``docker/base.sh`` makes (no registry can be pulled from here).
DOCKER_BASE_IMAGE = os.environ.get("DEPLOY_TEST_BASE_IMAGE", "baobab-base:bookworm")


def _no_docker_engine() -> str | None:
    """Why no engine can be reached, checked on a socket of our own (a failed client leaks its socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return None  # a TCP engine: let the client find out
    path = host.removeprefix("unix://")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError as e:
            return f"{path}: {e.strerror or e}"
    return None


@pytest.fixture(scope="session")
def docker_client():
    """A client of the machine's Docker engine that has the local base image (see :func:`missing_part`)."""
    import docker

    hint = "`make docker-engine` starts dockerd (as root) and builds the images"
    reason = _no_docker_engine()
    if reason:
        missing_part(f"no Docker engine answers here ({reason}); {hint}")
    client = docker.from_env(timeout=30)
    try:
        client.ping()
        client.images.get(DOCKER_BASE_IMAGE)
    except docker.errors.ImageNotFound:
        client.close()
        missing_part(f"base image {DOCKER_BASE_IMAGE} not found (no registry can be pulled from); {hint}")
    except docker.errors.DockerException as e:
        client.close()
        missing_part(f"no Docker engine answers here ({e}); {hint}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def docker_base_image() -> str:
    return DOCKER_BASE_IMAGE
