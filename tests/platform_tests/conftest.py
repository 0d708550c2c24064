"""``baobab up`` as a real process on a free port, on SQLite and on PostgreSQL (``db_url``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from baobab.sdk import Client
from baobab.store import build_tabular
from baobab.testing import LocalPlatform

ADMIN_EMAIL = "root@example.com"
ADMIN_PASSWORD = "root-password"


@dataclass
class Running:
    """A started ``baobab up`` and a client logged in to it."""

    platform: LocalPlatform
    client: Client

    def kill(self) -> None:
        self.platform.kill()

    def stop(self) -> int:
        return self.platform.stop()


StartPlatform = Callable[[], Running]


@pytest.fixture
def start_platform(db_url: str, tmp_path: Path) -> Iterator[StartPlatform]:
    """Starts ``baobab up --workers 2`` on one home and database; may be called again after a kill."""
    platform = LocalPlatform(
        tmp_path / "home",
        workers=2,
        settings={
            "BAOBAB_DATABASE_URL": db_url,
            "BAOBAB_ADMIN_EMAIL": ADMIN_EMAIL,
            "BAOBAB_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "BAOBAB_CPU_SLOTS": "2",
        },
    )

    def start() -> Running:
        client = Client(platform.start())
        client.login(ADMIN_EMAIL, ADMIN_PASSWORD)
        return Running(platform, client)

    yield start
    if platform.running:
        platform.stop()


@pytest.fixture(scope="session")
def breast_cancer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder with breast_cancer's train.csv, val.csv and test.csv (target column ``target``)."""
    folder = tmp_path_factory.mktemp("breast_cancer")
    build_tabular("breast_cancer", folder)
    return folder
