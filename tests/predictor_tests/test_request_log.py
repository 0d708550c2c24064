"""The request log's writer on a real artifact store: the sample, the parts, the bounded queue, failures."""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from baobab.predictor._request_log import RequestLog
from baobab.store import ArtifactStore, request_log_days
from baobab.testing import wait_until

JOB = 3
SIZE = 100  # the request's body, in bytes


def answer(n: int) -> dict[str, Any]:
    members = {"answered": [7], "left_out": [{"trial_id": 8, "reason": "slow"}]}
    return {"predictions": [n * 10], "version": f"v{n % 2 + 1}", "members": members}


def logged(store: ArtifactStore) -> list[dict[str, Any]]:
    """Every record of the job, day by day (oldest first) and part by part, as the API joins them."""
    lines = []
    for day in reversed(request_log_days(store, JOB)):
        for key in day.keys:
            lines += store.get_bytes(key).decode().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "artifacts")


def test_at_rate_1_every_answer_is_logged_with_its_time_latency_queries_and_members(store: ArtifactStore) -> None:
    log = RequestLog(store, JOB, 1.0, flush_s=60)
    before = datetime.now(UTC)
    for n in range(5):
        started = time.perf_counter()
        time.sleep(0.002)
        assert log.offer(started, [[n, 0.5], {"x": n}], answer(n), SIZE)
    assert request_log_days(store, JOB) == []  # gathered for a minute: nothing written yet
    log.close()
    after = datetime.now(UTC)
    records = logged(store)
    assert [r["queries"] for r in records] == [[[n, 0.5], {"x": n}] for n in range(5)]
    assert [r["predictions"] for r in records] == [[n * 10] for n in range(5)]
    assert all(r["members"] == answer(0)["members"] for r in records)
    assert all(set(r) == {"time", "latency_ms", "queries", "predictions", "version", "members"} for r in records)
    assert [r["version"] for r in records] == ["v1", "v2", "v1", "v2", "v1"]
    assert all(2.0 <= r["latency_ms"] < 5000 for r in records)
    times = [datetime.fromisoformat(r["time"]) for r in records]
    assert before <= times[0] <= times[-1] <= after and times == sorted(times)
    (day,) = request_log_days(store, JOB)
    assert day.day == before.date() or day.day == after.date()
    assert len(day.keys) == 1  # one part, written on close
    assert not log.offer(time.perf_counter(), [[1]], answer(1), SIZE)  # closed: nothing more is taken
    assert (log.written, log.dropped, log.lost) == (5, 0, 0)


def test_a_part_is_written_when_due_when_full_and_when_the_day_changes(store: ArtifactStore) -> None:
    due = RequestLog(store, JOB, 1.0, flush_s=0.05)
    due.offer(time.perf_counter(), [[1]], answer(1), SIZE)
    wait_until(lambda: logged(store), what="the part written flush_s after its first record")
    due.close()
    assert [r["queries"] for r in logged(store)] == [[[1]]]

    # A part holds at most max_part_bytes (one record over it); joined, the parts keep every record in order.
    full = RequestLog(store, JOB + 1, 1.0, flush_s=60, max_part_bytes=300)
    for n in range(20):
        full.offer(time.perf_counter(), [[n] * 10], answer(n), SIZE)
    full.close()
    days = request_log_days(store, JOB + 1)
    assert len(days) == 1 and len(days[0].keys) > 3
    joined = b"".join(store.get_bytes(key) for key in days[0].keys).decode().splitlines()
    assert [json.loads(line)["queries"] for line in joined] == [[[n] * 10] for n in range(20)]

    # Midnight (UTC) ends a part: each record goes to the day it came in.
    midnight = datetime(2026, 5, 2, tzinfo=UTC).timestamp()
    clock = iter([midnight - 0.5, midnight - 0.1, midnight + 0.1])
    rollover = RequestLog(store, JOB + 2, 1.0, flush_s=60, clock=lambda: next(clock))
    for n in range(3):
        rollover.offer(time.perf_counter(), [[n]], answer(n), SIZE)
    rollover.close()
    days = request_log_days(store, JOB + 2)
    assert [(d.day, len(d.keys)) for d in days] == [(date(2026, 5, 2), 1), (date(2026, 5, 1), 1)]
    assert store.get_bytes(days[0].keys[0]).count(b"\n") == 1


def test_the_sample_follows_the_rate_and_a_seeded_one_is_repeatable(store: ArtifactStore) -> None:
    offers = 4000
    seeded = RequestLog(store, JOB, 0.5, flush_s=60, queue_size=offers, rng=random.Random(11))
    kept = [seeded.offer(time.perf_counter(), [[n]], answer(n), SIZE) for n in range(offers)]
    seeded.close()
    draws = random.Random(11)
    assert kept == [draws.random() < 0.5 for _ in range(offers)]
    assert [r["queries"][0][0] for r in logged(store)] == [n for n in range(offers) if kept[n]]

    # Unseeded, at 0.1 and 0.5: within six standard deviations of the rate (a false alarm once in 10**8 runs).
    for rate in (0.1, 0.5):
        log = RequestLog(store, JOB + 1, rate, flush_s=60, queue_size=offers)
        count = sum(log.offer(time.perf_counter(), [[n]], answer(n), SIZE) for n in range(offers))
        log.close()
        spread = 6 * (offers * rate * (1 - rate)) ** 0.5
        assert abs(count - offers * rate) <= spread, (rate, count)

    for rate in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"request_log_rate must be in \(0, 1\]"):
            RequestLog(store, JOB, rate)


class SlowStore(ArtifactStore):
    """A local store whose writes wait until the test lets them go: a store that has fallen behind."""

    def __init__(self, url: Path) -> None:
        super().__init__(url)
        self.writing = threading.Event()
        self.go = threading.Event()

    def put_bytes(self, key: str, data: bytes | bytearray | memoryview) -> str:
        self.writing.set()
        assert self.go.wait(30)
        return super().put_bytes(key, data)


def test_a_full_queue_drops_and_counts_rather_than_wait(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "artifacts")
    log = RequestLog(store, JOB, 1.0, flush_s=60, max_part_bytes=1, queue_size=2)
    assert log.offer(time.perf_counter(), [[0]], answer(0), SIZE)
    assert store.writing.wait(10)  # the writer holds record 0 and waits on the store
    # The store lets no write go until the test says so, after the offers: an offer that waited for the
    # store (or for room in the queue) would keep its record only once the store's 30-s wait had failed.
    kept = [log.offer(time.perf_counter(), [[n]], answer(n), SIZE) for n in range(1, 101)]
    assert kept == [True, True] + [False] * 98
    assert log.dropped == 98
    store.go.set()
    log.close()
    assert [r["queries"] for r in logged(store)] == [[[0]], [[1]], [[2]]]
    assert (log.written, log.dropped) == (3, 98)

    # The queue holds at most max_queued_bytes of request bodies, however few the records; one alone may be larger.
    store.go.clear()
    store.writing.clear()
    log = RequestLog(store, JOB + 1, 1.0, flush_s=60, max_part_bytes=1, max_queued_bytes=1000)
    assert log.offer(time.perf_counter(), [[0]], answer(0), 5000)
    assert store.writing.wait(10)
    sizes = [600, 300, 200, 100, 5000]
    assert [log.offer(time.perf_counter(), [[n]], answer(n), size) for n, size in enumerate(sizes, 1)] == [
        True, True, False, True, False
    ]  # fmt: skip
    store.go.set()
    log.close()
    assert (log.written, log.dropped) == (4, 2)


def test_a_store_that_fails_loses_that_part_only(store: ArtifactStore, tmp_path: Path) -> None:
    (tmp_path / "artifacts" / "request_logs").write_text("a file where the folder should be")
    log = RequestLog(store, JOB, 1.0, flush_s=60, max_part_bytes=1)
    log.offer(time.perf_counter(), [[1]], answer(1), SIZE)
    wait_until(lambda: log.lost == 1, what="the failed part counted")
    (tmp_path / "artifacts" / "request_logs").unlink()
    log.offer(time.perf_counter(), [[2]], answer(2), SIZE)
    log.close()
    assert [r["queries"] for r in logged(store)] == [[[2]]]
    assert (log.written, log.lost, log.dropped) == (1, 1, 0)
