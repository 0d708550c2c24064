"""The worker machines' inventories, as the Celery executor keeps them for the admin API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select

from baobab.store import Gpu, Inventory
from baobab.store._db import LIVE_S, Worker, live_workers, report_workers, session_scope

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
GPU_BOX = Inventory(slots=2, cores=32, memory_mb=256_000, gpus=(Gpu(0, "H200", 143_771), Gpu(1, "H200", 143_771)))
CPU_BOX = Inventory(slots=4, cores=8, memory_mb=16_000)


def test_a_report_keeps_each_workers_inventory_and_a_later_one_replaces_it(engine: Engine) -> None:
    with session_scope(engine) as session:
        report_workers(session, {"gpu@a": GPU_BOX, "cpu@b": CPU_BOX}, NOW)
    with session_scope(engine) as session:
        assert live_workers(session, NOW) == {"cpu@b": CPU_BOX, "gpu@a": GPU_BOX}
    fewer = Inventory(slots=1, cores=32, memory_mb=256_000, gpus=GPU_BOX.gpus[:1])  # a GPU gone
    with session_scope(engine) as session:
        report_workers(session, {"gpu@a": fewer}, NOW + timedelta(seconds=5))
    with session_scope(engine) as session:
        assert live_workers(session, NOW + timedelta(seconds=5))["gpu@a"] == fewer
        assert session.scalar(select(func.count()).select_from(Worker)) == 2


def test_a_worker_not_seen_for_a_while_is_no_longer_live_and_is_forgotten_after_an_hour(engine: Engine) -> None:
    with session_scope(engine) as session:
        report_workers(session, {"old@a": CPU_BOX}, NOW)
        report_workers(session, {"new@b": CPU_BOX}, NOW + timedelta(seconds=LIVE_S + 1))
    with session_scope(engine) as session:
        assert list(live_workers(session, NOW + timedelta(seconds=LIVE_S + 1))) == ["new@b"]
        report_workers(session, {"new@b": CPU_BOX}, NOW + timedelta(hours=2))
    with session_scope(engine) as session:
        assert session.scalars(select(Worker.name)).all() == ["new@b"]


def test_an_inventory_goes_to_json_and_back() -> None:
    assert Inventory.from_json(GPU_BOX.to_json()) == GPU_BOX


@pytest.mark.parametrize(
    "data",
    [
        {"slots": 1, "cores": 2},
        {"slots": "one", "cores": 2, "memory_mb": 1},
        {**CPU_BOX.to_json(), "gpus": [{"index": 0}]},
    ],
)
def test_what_is_no_inventory_is_refused_naming_what_was_sent(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not a worker inventory"):
        Inventory.from_json(data)
