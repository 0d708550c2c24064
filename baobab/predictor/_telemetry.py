"""A predictor's Prometheus metrics, and its ``GET /metrics``.

What is measured: ``POST /predict`` requests by status and their latency, the size and
time of each batch sent to the members, the batches each member was left out of (by
trial id), the queries waiting for a batch, and the worker replicas serving. The other routes (``/health``,
``/metrics``, ``/stats``) are not counted: they are the platform's and the scraper's, not traffic.

Requests and their latencies carry a ``version`` label: the version that answered
(:func:`served_by`), or :data:`NO_VERSION` for a request refused before one was picked (a
wrong key, a bad body). Batches are counted for the whole predictor: versions with the same
members share their batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask, Response, g
from prometheus_client import Counter, Gauge, Histogram

from baobab._prometheus import exposition, time_requests
from baobab.predictor._members import BatchOutcome
from baobab.predictor._router import VersionRouter

__all__ = ["BATCH_SIZE", "NO_VERSION", "REQUESTS", "REQUEST_SECONDS", "instrument", "measured_batches", "served_by"]

#: The ``version`` label of a request answered before a version was picked for it.
NO_VERSION = "none"
_PREDICT = "/predict"
_VERSION = "baobab_version"

REQUESTS = Counter(
    "baobab_predictor_requests", "POST /predict requests answered, by version and status", ["version", "status"]
)
REQUEST_SECONDS = Histogram(
    "baobab_predictor_request_seconds",
    "Time to answer POST /predict, by version",
    ["version"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
BATCH_SIZE = Histogram(
    "baobab_predictor_batch_size",
    "Queries in each batch sent to the members",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)
BATCH_SECONDS = Histogram(
    "baobab_predictor_batch_seconds",
    "Time the members took to answer a batch, ensembling included",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
LEFT_OUT = Counter("baobab_predictor_members_left_out", "Batches a member was left out of, by its trial id", ["trial"])
QUEUE_DEPTH = Gauge("baobab_predictor_queue_depth", "Queries waiting to be sent to the members in a batch")
REPLICAS = Gauge(
    "baobab_predictor_replicas", "Worker replicas serving, added up over the member sets of the versions served"
)


def measured_batches(process: Callable[[list[Any]], BatchOutcome]) -> Callable[[list[Any]], BatchOutcome]:
    """``process`` (what a :class:`MicroBatcher` calls with each batch), counting batch sizes, times and members
    left out."""

    def measured(batch: list[Any]) -> BatchOutcome:
        with BATCH_SECONDS.time():
            outcome = process(batch)
        BATCH_SIZE.observe(len(batch))
        for left_out in outcome.left_out:
            LEFT_OUT.labels(str(left_out.trial_id)).inc()
        return outcome

    return measured


def instrument(app: Flask, router: VersionRouter) -> None:
    """Count and time ``app``'s predict requests, follow the queues of ``router``'s versions, serve metrics."""
    time_requests(app, _observe)
    QUEUE_DEPTH.set_function(router.queued)
    REPLICAS.set_function(router.replicas)
    app.add_url_rule("/metrics", "metrics", _metrics, methods=["GET"])


def served_by(version: str) -> None:
    """Label the request being answered with ``version``, the version that answers it."""
    setattr(g, _VERSION, version)


def _observe(route: str, method: str, status: int, seconds: float) -> None:
    if route == _PREDICT:
        version = g.get(_VERSION, NO_VERSION)
        REQUESTS.labels(version, str(status)).inc()
        REQUEST_SECONDS.labels(version).observe(seconds)


def _metrics() -> Response:
    """The predictor's Prometheus metrics.

    Open, like ``/health``, even when ``/predict`` needs the job's API key: a scraper
    holds no key, and what it reads is counts, durations and member trial ids, never a
    query, an answer or a header (the key never reaches a label).
    """
    body, content_type = exposition()
    return Response(body, headers={"Content-Type": content_type})
