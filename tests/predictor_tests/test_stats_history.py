"""The predictor's serving history (``GET /stats``): deltas of real prometheus_client metrics under a fake clock.

The metrics are of the predictor's kinds and labels, on a registry of the test's own, so
that nothing else counts into them.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from datetime import datetime

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from baobab.predictor._history import History, histogram_quantile
from baobab.testing import wait_until

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)  # +Inf is added
T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Served:
    """Metrics labelled as a predictor's three are, and a history over them."""

    def __init__(self, clock: Clock, **options: float) -> None:
        registry = CollectorRegistry()
        self.requests = Counter("requests", "", ["version", "status"], registry=registry)
        self.latency = Histogram("latency", "", ["version"], buckets=LATENCY_BUCKETS, registry=registry)
        self.batch_size = Histogram("batch_size", "", ["version"], registry=registry)
        self.history = History(self.requests, self.latency, self.batch_size, clock=clock, **options)

    def answer(self, seconds: float, *, status: str = "200", version: str = "default", times: int = 1) -> None:
        for _ in range(times):
            self.requests.labels(version, status).inc()
            self.latency.labels(version).observe(seconds)

    def batch(self, size: int, version: str = "default") -> None:
        self.batch_size.labels(version).observe(size)


def test_the_quantile_interpolates_inside_the_bucket_of_the_rank_as_prometheus_does() -> None:
    buckets = [(0.1, 4.0), (0.2, 4.0), (0.5, 8.0), (math.inf, 10.0)]
    assert histogram_quantile(0.2, buckets) == pytest.approx(0.1 * 2 / 4)  # first bucket: from 0
    assert histogram_quantile(0.6, buckets) == pytest.approx(0.2 + (0.5 - 0.2) * (6 - 4) / (8 - 4))
    assert histogram_quantile(0.4, buckets) == pytest.approx(0.1)  # the rank is the first bucket's count
    assert histogram_quantile(0.99, buckets) == 0.5  # in +Inf: the highest finite bound
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.5, []) is None


def test_the_first_sample_is_the_baseline_and_each_next_one_a_point_of_the_deltas() -> None:
    clock = Clock()
    served = Served(clock)
    served.answer(0.003, times=50)  # before the baseline: never in a point
    served.batch(64)
    assert served.history.sample() is None
    assert served.history.points() == []

    clock.now += 10
    served.answer(0.03, times=4)  # bucket (0.025, 0.05]
    served.answer(0.2, times=3, status="400")  # bucket (0.1, 0.25], another status
    served.answer(0.2, version="canary")  # and another version: the job's traffic is every label's
    for size in (2, 4, 9):
        served.batch(size)
    point = served.history.sample()
    assert point is not None and point.time == clock.now
    assert point.requests == 8
    assert point.requests_per_s == pytest.approx(8 / 10)
    # Ranks 4 and 7.92 of 8, in the interval's bucket deltas (the 50 at 3 ms before are not in them).
    assert point.p50_ms == pytest.approx(1000 * (0.025 + (0.05 - 0.025) * (4 - 0) / (4 - 0)))
    assert point.p99_ms == pytest.approx(1000 * (0.1 + (0.25 - 0.1) * (7.92 - 4) / (8 - 4)))
    assert point.batch_size == pytest.approx((2 + 4 + 9) / 3)

    clock.now += 20  # a late sample: the rate is over the time that passed
    served.answer(0.0001, times=5)
    idle = served.history.sample()
    assert idle is not None
    assert (idle.requests, idle.requests_per_s) == (5, pytest.approx(5 / 20))
    assert idle.p50_ms == pytest.approx(1000 * 0.001 * 2.5 / 5)
    assert idle.batch_size is None  # no batch: no size, rather than 0

    clock.now += 10
    quiet = served.history.sample()
    assert quiet is not None and (quiet.requests, quiet.p50_ms, quiet.p99_ms) == (0, None, None)
    assert served.history.points() == [point, idle, quiet]


def test_the_json_has_the_points_oldest_first_with_utc_times() -> None:
    clock = Clock()
    served = Served(clock, interval_s=5)
    served.history.sample()
    clock.now += 5
    served.answer(0.004, times=2)
    served.history.sample()
    body = served.history.to_json()
    assert (body["interval_s"], body["window_s"]) == (5, 3600)
    [point] = body["points"]
    assert datetime.fromisoformat(point["time"]).timestamp() == clock.now
    assert point["time"].endswith("+00:00")
    assert point["requests"] == 2 and point["requests_per_s"] == pytest.approx(0.4)
    assert point["p50_ms"] == pytest.approx(1000 * (0.0025 + 0.0025 * 1 / 2))
    assert point["batch_size"] is None


def test_only_the_last_hour_is_kept() -> None:
    clock = Clock()
    served = Served(clock)
    served.history.sample()
    for _ in range(400):
        clock.now += 10
        served.answer(0.01)
        served.history.sample()
    points = served.history.points()
    assert len(points) == 360
    assert points[0].time == clock.now - 3590 and points[-1].time == clock.now
    assert all(p.requests == 1 for p in points)

    clock.now += 1800  # no sample for half an hour (a stalled thread): what is older than an hour goes anyway
    assert [p.time for p in served.history.points()] == [p.time for p in points[180:]]


def test_the_interval_must_fit_the_window() -> None:
    for interval in (0, -1, 3601):
        with pytest.raises(ValueError, match="interval_s"):
            Served(Clock(), interval_s=interval)


def test_a_predictor_refuses_an_interval_that_does_not_fit_and_says_why() -> None:
    ended = subprocess.run(
        [sys.executable, "-m", "baobab.predictor", "1", "--stats-interval-s=0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ended.returncode == 1
    assert ended.stderr.strip().endswith(
        "error: --stats-interval-s: interval_s=0.0 must be above 0 and at most window_s=3600.0"
    )


def test_started_it_samples_every_interval_until_closed() -> None:
    registry = CollectorRegistry()
    requests = Counter("requests", "", registry=registry)
    history = History(
        requests,
        Histogram("latency", "", registry=registry),
        Histogram("batch_size", "", registry=registry),
        interval_s=0.05,
    )
    before = set(threading.enumerate())
    history.start()
    assert set(threading.enumerate()) - before  # it samples in a thread of its own
    requests.inc(3)
    wait_until(lambda: len(history.points()) >= 3, what="three points")
    history.close()
    assert sum(p.requests for p in history.points()) == 3
    # Closed, it adds no point: the thread that sampled has ended, so no wait for a point that must not come.
    assert set(threading.enumerate()) - before == set()
