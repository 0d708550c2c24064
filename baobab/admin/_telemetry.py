"""The admin API's Prometheus metrics, and ``GET /metrics`` where a scraper reads them.

Every request is counted by route, method and status, and timed by route and method
(:func:`baobab._prometheus.time_requests`). In ``baobab up`` the job driver and the local
workers run in the API's process, so their metrics are here too; under gunicorn (``baobab
api``) the answer adds up every gunicorn process (:mod:`baobab._prometheus`).
"""

from __future__ import annotations

from flask import Blueprint, Response
from flask.blueprints import BlueprintSetupState
from prometheus_client import Counter, Histogram

from baobab._prometheus import exposition, time_requests
from baobab.admin._auth import public

__all__ = ["blueprint"]

REQUESTS = Counter(
    "baobab_api_requests",
    "Requests the admin API answered, by route (URL rule), method and status",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "baobab_api_request_seconds",
    "Time the admin API took to answer a request, by route and method",
    ["route", "method"],
)

blueprint = Blueprint("telemetry", __name__)


@blueprint.record_once
def _time_requests(state: BlueprintSetupState) -> None:
    time_requests(state.app, _observe)


def _observe(route: str, method: str, status: int, seconds: float) -> None:
    REQUESTS.labels(route, method, str(status)).inc()
    REQUEST_SECONDS.labels(route, method).observe(seconds)


@blueprint.get("/metrics")
@public
def metrics() -> Response:
    """The Prometheus metrics of this API (and, in ``baobab up``, of its driver and workers).

    It needs no token, unlike everything under ``/api/v1``: a scraper holds no user's
    token (and a token expires within a day), and what it reads is counts and durations
    labelled by route template (``/api/v1/train_jobs/<app>``, never an app's name), status,
    trial state, strategy and phase, nothing a user stored. A label must never carry a name,
    a path or a header. Where even the request counts are private, keep ``/metrics`` off the
    public side of the ingress.
    """
    body, content_type = exposition()
    return Response(body, headers={"Content-Type": content_type})
