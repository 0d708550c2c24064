"""A whole cluster on one machine, one process per service: what the cluster tests and benchmark drive.

Each service is the real command (``baobab api`` under gunicorn, ``baobab advisor``,
``baobab worker``, ``baobab predictor``) in a process group of its own, so a test can
kill one (``kill -9`` of a worker machine, of the advisor), freeze one (``SIGSTOP``: a
worker that never answers again) or start another, while the rest go on against the
same PostgreSQL, broker and artifact URL.

Workers stand for separate machines: each has its own ``BAOBAB_HOME`` (caches and
working directory) and none is given the database URL, since cluster workers reach
the store only through the API.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from baobab._contained import descendants_of

__all__ = ["LocalCluster", "Service"]

#: Variables only the API, the advisor and the predictor host get; workers never do.
_STORE_ONLY = ("BAOBAB_DATABASE_URL", "BAOBAB_ADMIN_EMAIL", "BAOBAB_ADMIN_PASSWORD")


class Service:
    """One service process (``python -m baobab <args>``), its log, and how to end it.

    ``metrics_url``: where its Prometheus metrics are, when it serves them on a port of its own.
    """

    def __init__(
        self, name: str, args: Sequence[str], env: Mapping[str, str], log: Path, metrics_url: str | None = None
    ) -> None:
        self.name = name
        self.args = list(args)
        self.env = dict(env)
        self.log = log
        self.metrics_url = metrics_url
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Service:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "baobab", *self.args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a kill takes its children too
            )
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, how: signal.Signals) -> None:
        """Send ``how`` to the whole process group (a worker's pool processes included) and to every process
        below it (a pool process's worker processes, each in a session of its own): the machine as a whole."""
        if self.process is not None:
            below = descendants_of(self.process.pid) if self.process.returncode is None else set()
            try:
                os.killpg(self.process.pid, how)
            except ProcessLookupError:
                pass
            for pid in below:
                try:
                    os.kill(pid, how)
                except ProcessLookupError:
                    pass

    def kill(self) -> None:
        """``kill -9`` of the service and its children: a machine that dies."""
        self.signal(signal.SIGKILL)
        self.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if not self.running:
            self.wait()
            return
        self.signal(signal.SIGCONT)  # a frozen service cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        try:
            assert self.process is not None
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
        self.wait()

    def wait(self) -> None:
        if self.process is not None:
            self.process.wait()
            # Pool processes outlive a killed parent for a moment; none may outlive the service.
            self.signal(signal.SIGKILL)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalCluster:
    """An API, an advisor and ``workers`` worker "machines" on ``database_url`` and ``broker_url``.

    Args:
        home: a folder of its own; each service gets a subfolder (its home and log).
        database_url: PostgreSQL (or SQLite, for the API, advisor and predictor host only).
        broker_url: the Celery broker, which also carries the events.
        workers: worker machines to start.
        slots: trials at once per worker machine.
        settings: more ``BAOBAB_*`` variables for every service (timeouts, the admin).
        executor: the API's and the advisors' ``BAOBAB_EXECUTOR``; with ``docker``
            (and ``workers=0``) the advisor starts the workers and predictors as containers.
    """

    def __init__(
        self,
        home: Path,
        *,
        database_url: str,
        broker_url: str,
        workers: int = 2,
        slots: int = 1,
        settings: Mapping[str, str] | None = None,
        executor: str = "celery",
    ) -> None:
        self.home = Path(home)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("BAOBAB_")}
        base.update(
            settings or {},
            BAOBAB_BROKER_URL=broker_url,
            BAOBAB_EXECUTOR="celery",
            BAOBAB_ARTIFACTS_URL=str(self.home / "shared-artifacts"),
            BAOBAB_API_URL=self.url,
        )
        #: The key the API, advisor and predictor host share, as a real cluster's do (workers get none).
        self.secret_key = secrets.token_urlsafe(32)
        # Each service has a home of its own.
        self._server_env = {
            **base,
            "BAOBAB_DATABASE_URL": database_url,
            "BAOBAB_EXECUTOR": executor,
            "BAOBAB_SECRET_KEY": self.secret_key,
        }
        self._worker_env = {k: v for k, v in base.items() if k not in _STORE_ONLY}
        self.slots = slots
        self.api = self._service("api", ["api", "--host", "127.0.0.1", "--port", str(self.port)], self._server_env)
        self.advisors: list[Service] = []
        self.workers: list[Service] = []
        self.predictor: Service | None = None
        self._initial_workers = workers

    def _service(self, name: str, args: Sequence[str], env: Mapping[str, str], *, metrics: bool = False) -> Service:
        """``metrics``: the service serves its metrics on a port of its own (a free one; several run here)."""
        folder = self.home / name
        metrics_url = None
        if metrics:
            port = _free_port()
            args = [*args, "--metrics-port", str(port)]
            metrics_url = f"http://127.0.0.1:{port}/metrics"
        return Service(name, args, {**env, "BAOBAB_HOME": str(folder)}, folder / "service.log", metrics_url)

    def start(self, *, timeout: float = 60.0) -> str:
        """Start the API (and wait until it answers), one advisor and the workers; returns the API's URL."""
        self.api.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/v1/openapi.json", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError) as e:
                if not self.api.running or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"baobab api did not answer ({e}); its log:\n{self.api.log_text()[-3000:]}"
                    ) from None
                time.sleep(0.1)
        self.add_advisor()
        for _ in range(self._initial_workers):
            self.add_worker()
        return self.url

    def add_advisor(self) -> Service:
        advisor = self._service(f"advisor-{len(self.advisors)}", ["advisor"], self._server_env, metrics=True).start()
        self.advisors.append(advisor)
        return advisor

    def add_worker(self) -> Service:
        """Start another worker "machine" (its own home and cache), named ``w<i>@cluster``."""
        i = len(self.workers)
        args = ["worker", "--slots", str(self.slots), "--name", f"w{i}@cluster"]
        worker = self._service(f"worker-{i}", args, self._worker_env, metrics=True).start()
        self.workers.append(worker)
        return worker

    def add_predictor_host(self) -> Service:
        self.predictor = self._service("predictor", ["predictor"], self._server_env).start()
        return self.predictor

    def services(self) -> list[Service]:
        return [self.api, *self.advisors, *self.workers, *([self.predictor] if self.predictor else [])]

    def stop(self) -> None:
        for service in reversed(self.services()):
            service.stop()

    def logs(self) -> str:
        """Every service's log, for a failing test's report."""
        return "\n".join(f"===== {s.name} =====\n{s.log_text()[-4000:]}" for s in self.services())

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
