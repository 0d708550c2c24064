"""``baobab up`` as a real process on a free port, on SQLite and on PostgreSQL (``db_url``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from baobab.sdk import Client
from baobab.store import build_tabular

ADMIN_EMAIL = "root@example.com"
ADMIN_PASSWORD = "root-password"


@dataclass
class Running:
    """A started ``baobab up``: its process, URL and a logged-in client."""

    process: subprocess.Popen[str]
    url: str
    client: Client

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut would: no clean-up runs."""
        self.process.kill()
        self.process.wait(timeout=30)
        self._close_pipe()

    def stop(self) -> int:
        """SIGTERM, as a service manager would; returns the exit status."""
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=60)
        self._close_pipe()
        return status

    def _close_pipe(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()


StartPlatform = Callable[[], Running]


@pytest.fixture
def start_platform(db_url: str, tmp_path: Path) -> Iterator[StartPlatform]:
    """Starts ``baobab up --port 0 --workers 2`` on one home and database; may be called again after a kill."""
    started: list[Running] = []
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BAOBAB_")},
        "BAOBAB_HOME": str(tmp_path / "home"),
        "BAOBAB_DATABASE_URL": db_url,
        "BAOBAB_ADMIN_EMAIL": ADMIN_EMAIL,
        "BAOBAB_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "BAOBAB_CPU_SLOTS": "2",
    }

    def start() -> Running:
        log = tmp_path / f"up-{len(started)}.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "baobab", "up", "--port", "0", "--workers", "2"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"baobab up did not start; see {log}"
        client = Client(url)
        client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
        running = Running(process, url, client)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.process.poll() is None:
            running.stop()


@pytest.fixture(scope="session")
def breast_cancer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder with breast_cancer's train.csv, val.csv and test.csv (target column ``target``)."""
    folder = tmp_path_factory.mktemp("breast_cancer")
    build_tabular("breast_cancer", folder)
    return folder
