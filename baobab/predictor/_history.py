"""The last hour of a predictor's serving, sampled from its own Prometheus counters, for ``GET /stats``.

The web UI charts requests per second, p50 and p99 latency and the mean batch size of a
running inference job without a Prometheus server: every ``interval_s`` (10 s) a daemon
thread reads the predictor's counters, and each interval's deltas become one point. The
quantiles come from the deltas of the latency histogram's buckets, interpolated linearly
inside the bucket that holds the rank, as Prometheus' ``histogram_quantile`` does over a
``rate()``; so a point is as precise as the buckets of
:data:`~baobab.predictor._telemetry.REQUEST_SECONDS`. Points older than ``window_s`` (an
hour) are dropped. Every label (status, version) is added up: the points are the job's.

The points hold counts and durations only, never a query, an answer or a key, which is
why ``/stats`` is open like ``/metrics``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Histogram

__all__ = ["History", "StatsPoint", "histogram_quantile"]

#: Seconds between two samples, and how far back the points go.
INTERVAL_S = 10.0
WINDOW_S = 3600.0


@dataclass(frozen=True)
class StatsPoint:
    """One interval of serving: the requests answered (any status), the latencies of their answers, the mean
    queries per batch; the latencies and batch size are None when nothing was answered or batched."""

    time: float  # the interval's end, Unix seconds
    requests: int
    requests_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    batch_size: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "time": datetime.fromtimestamp(self.time, UTC).isoformat(),
            "requests": self.requests,
            "requests_per_s": self.requests_per_s,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "batch_size": self.batch_size,
        }


@dataclass(frozen=True)
class _Reading:
    """The counters at one moment, every label added up."""

    time: float
    requests: float
    latency_buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), +Inf last
    batches: float
    batched_queries: float


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of cumulative ``buckets`` ((upper bound, count), ascending, +Inf last), as Prometheus
    computes it: linear inside the bucket that holds the rank, and the highest finite bound when the rank falls
    in the +Inf bucket. None when the buckets hold no observation."""
    if len(buckets) < 2 or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    index = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    end, count = buckets[index]
    if index == 0 and end <= 0:
        return end
    start, below = (0.0, 0.0) if index == 0 else buckets[index - 1]
    return start + (end - start) * (rank - below) / (count - below)


class History:
    """Points of serving over the last ``window_s``, one per ``interval_s``, from ``requests``, ``latency`` and
    ``batch_size`` (the predictor's :mod:`._telemetry` metrics, or any of the same kinds in a test).

    :meth:`start` samples once (the baseline) and then every ``interval_s`` in a daemon thread;
    :meth:`sample` takes one sample now, which is what the thread calls and what a test with a fake
    ``clock`` (Unix seconds) calls instead. Thread-safe.
    """

    def __init__(
        self,
        requests: Counter,
        latency: Histogram,
        batch_size: Histogram,
        *,
        interval_s: float = INTERVAL_S,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0 < interval_s <= window_s:
            raise ValueError(f"{interval_s=} must be above 0 and at most {window_s=}")
        self._requests, self._latency, self._batch_size = requests, latency, batch_size
        self.interval_s, self.window_s = interval_s, window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: _Reading | None = None
        self._points: deque[StatsPoint] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> StatsPoint | None:
        """Read the counters now and add the point since the last sample (None for the first, the baseline)."""
        reading = self._read()
        with self._lock:
            last, self._last = self._last, reading
            seconds = reading.time - last.time if last is not None else 0.0
            point = _point(last, reading) if last is not None and seconds > 0 else None
            if point is not None:
                self._points.append(point)
            self._forget(reading.time)
        return point

    def points(self) -> list[StatsPoint]:
        """The points of the last ``window_s``, oldest first."""
        with self._lock:
            self._forget(self._clock())
            return list(self._points)

    def to_json(self) -> dict[str, Any]:
        """What ``GET /stats`` answers."""
        return {
            "interval_s": self.interval_s,
            "window_s": self.window_s,
            "points": [point.to_json() for point in self.points()],
        }

    def start(self) -> None:
        """Take the baseline now, then a sample every ``interval_s`` until :meth:`close`."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="stats-history", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop sampling; no point is added once this returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def _forget(self, now: float) -> None:
        while self._points and self._points[0].time <= now - self.window_s:
            self._points.popleft()

    def _read(self) -> _Reading:
        now = self._clock()
        requests = sum(s.value for m in self._requests.collect() for s in m.samples if s.name.endswith("_total"))
        bounds: dict[float, float] = {}
        for metric in self._latency.collect():
            for s in metric.samples:
                if s.name.endswith("_bucket"):
                    bound = float(s.labels["le"])
                    bounds[bound] = bounds.get(bound, 0.0) + s.value
        batches = batched = 0.0
        for metric in self._batch_size.collect():
            for s in metric.samples:
                if s.name.endswith("_count"):
                    batches += s.value
                elif s.name.endswith("_sum"):
                    batched += s.value
        return _Reading(now, requests, tuple(sorted(bounds.items())), batches, batched)


def _point(before: _Reading, after: _Reading) -> StatsPoint:
    seconds = after.time - before.time
    earlier = dict(before.latency_buckets)
    buckets = [(bound, count - earlier.get(bound, 0.0)) for bound, count in after.latency_buckets]
    p50, p99 = (histogram_quantile(q, buckets) for q in (0.5, 0.99))
    batches = after.batches - before.batches
    requests = after.requests - before.requests
    return StatsPoint(
        time=after.time,
        requests=round(requests),
        requests_per_s=requests / seconds,
        p50_ms=None if p50 is None else p50 * 1000,
        p99_ms=None if p99 is None else p99 * 1000,
        batch_size=(after.batched_queries - before.batched_queries) / batches if batches > 0 else None,
    )
