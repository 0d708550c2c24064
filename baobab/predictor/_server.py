"""The predictor's HTTP API: ``POST /predict``, ``GET /health``, ``GET /metrics`` (:mod:`._telemetry`) and
``GET /stats`` (:mod:`._history`).

Each request is answered by one version of the job (:mod:`baobab.predictor._router`),
which the answer names (``"version"``).

Errors answer like the admin API's, with the envelope of :mod:`baobab.error_envelope`;
401 adds ``WWW-Authenticate: Bearer``. The JSON body is parsed strictly: ``NaN`` and
``Infinity`` are not JSON and are refused.

A body over ``BAOBAB_MAX_PREDICT_MB`` is answered 413 before it is read: waitress
(:func:`create_server`) refuses a ``Content-Length`` over the limit from the headers, and
stops a chunked body as soon as it passes the limit (its chunk framing counts); the app holds the same limit
(``MAX_CONTENT_LENGTH``) should another server run it. Without the limit a 50 MB body took a
predictor to 600 MB while ``json`` parsed it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

import waitress
from flask import Flask, Response, request
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, MultiSocketServer
from waitress.task import ErrorTask
from waitress.utilities import RequestEntityTooLarge as WaitressTooLarge
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from baobab.error_envelope import ErrorEnvelope
from baobab.exceptions import AuthenticationError, RequestError
from baobab.predictor._history import History
from baobab.predictor._job import PredictorJob
from baobab.predictor._queries import check_queries
from baobab.predictor._request_log import RequestLog
from baobab.predictor._router import VersionRouter
from baobab.predictor._telemetry import instrument, served_by

__all__ = ["create_app", "create_server", "too_large_message"]

logger = logging.getLogger("baobab.predictor")

_BODY_FIELDS = ("queries",)


class _Unavailable(Exception):
    """No member answered (503)."""


def too_large_message(max_mb: int) -> str:
    """What a 413 says: the limit, and the setting that holds it."""
    return f"the request body is larger than the limit of {max_mb} MiB (BAOBAB_MAX_PREDICT_MB); send fewer queries"


def create_app(
    job: PredictorJob,
    router: VersionRouter,
    request_log: RequestLog | None = None,
    history: History | None = None,
    *,
    max_body_mb: int,
) -> Flask:
    """The WSGI app serving ``job`` through the versions of ``router``; answers go to ``request_log`` too, and
    ``GET /stats`` answers ``history``'s points. A body over ``max_body_mb`` MiB is answered 413."""
    app = Flask("baobab.predictor")
    app.config["MAX_CONTENT_LENGTH"] = max_body_mb * 2**20  # the same limit behind a server other than ours
    app.register_error_handler(Exception, _handle_error)
    instrument(app, router)

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Always 200 while the process serves; ``ready`` counts the members up now, ``revision`` is the one served."""
        return {"status": "ok", **router.health()}

    if history is not None:

        @app.get("/stats")
        def stats() -> dict[str, Any]:
            """The last hour of serving, a point per interval: requests per second, p50 and p99 latency, batch size.

            Open, like ``/metrics`` and ``/health``, even when ``/predict`` needs the job's API
            key: it holds counts and latencies only, never a query, an answer or a key. The
            admin API relays it to the web UI (``GET /api/v1/inference_jobs/<id>/stats``).
            """
            return history.to_json()

    @app.post("/predict")
    def predict() -> Response:
        started = time.perf_counter()
        if not job.public:
            _authenticate(job.api_key_hash)
        sent = _body()["queries"]
        queries = check_queries(sent, job.query_format)
        with router.route() as version:  # the one place that knows which version answers this request
            served_by(version.name)
            parts = version.backend.batcher.submit(queries).wait()
        assert parts is not None  # waited without a timeout
        predictions: list[Any] = []
        failed: list[str] = []
        answered: set[int] | None = None
        left_out: dict[int, str] = {}
        for part in parts:
            if part.error is not None:
                raise part.error
            outcome = part.outcome
            assert outcome is not None
            for lo in outcome.left_out:
                left_out.setdefault(lo.trial_id, lo.reason)
            if outcome.predictions is None:
                failed.extend(f"trial {lo.trial_id}: {lo.reason}" for lo in outcome.left_out)
                continue
            predictions.extend(outcome.predictions[part.start : part.stop])
            answered = set(outcome.answered) if answered is None else answered & set(outcome.answered)
        if failed:
            raise _Unavailable(
                f"no member of version {version.name!r} of inference job {job.id} could answer: {'; '.join(failed)}"
            )
        order = version.backend.members
        body = {
            "predictions": predictions,
            "version": version.name,
            "members": {
                "answered": [t for t in order if t in (answered or set()) and t not in left_out],
                "left_out": [{"trial_id": t, "reason": left_out[t]} for t in order if t in left_out],
            },
        }
        if request_log is not None:
            request_log.offer(started, sent, body, request.content_length or 0)
        return Response(json.dumps(body, allow_nan=False), mimetype="application/json")

    return app


def _authenticate(api_key_hash: str | None) -> None:
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise AuthenticationError(
            "this inference job needs its API key: send the header 'Authorization: Bearer <api_key>' "
            "(the key was shown once, when the inference job was created)"
        )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    if api_key_hash is None or not hmac.compare_digest(digest, api_key_hash):
        raise AuthenticationError("wrong API key for this inference job")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _body() -> dict[str, Any]:
    raw = request.get_data(cache=False)
    try:
        body = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise RequestError(f'the request body is not valid JSON ({e}); send {{"queries": [...]}}') from None
    if not isinstance(body, dict):
        raise RequestError('the request body must be a JSON object: {"queries": [...]}')
    for name in body:
        if name not in _BODY_FIELDS:
            raise RequestError(f"unknown field {name!r}; the body holds only 'queries'", field=name)
    if "queries" not in body:
        raise RequestError("'queries' is required: send {\"queries\": [...]}", field="queries")
    return body


def _handle_error(e: Exception) -> Response:
    if isinstance(e, HTTPException) and e.code is not None:
        return _error(e.code, e.description or HTTP_STATUS_CODES[e.code], None)
    if isinstance(e, RequestError):
        return _error(400, str(e), e.field)
    if isinstance(e, AuthenticationError):
        response = _error(401, str(e), None)
        response.headers["WWW-Authenticate"] = "Bearer"
        return response
    if isinstance(e, _Unavailable):
        return _error(503, str(e), None)
    logger.error("unhandled error in the predictor", exc_info=e)
    return _error(500, "internal error: the predictor logged the details", None)


def _error(status: int, message: str, field: str | None) -> Response:
    body = json.dumps(ErrorEnvelope.for_status(status, message, field).to_json())
    return Response(body, status=status, mimetype="application/json")


def create_server(app: Flask, *, max_body_mb: int, **options: Any) -> BaseWSGIServer | MultiSocketServer:
    """A waitress server for ``app`` (``options`` as :func:`waitress.create_server` takes them) that refuses a
    body over ``max_body_mb`` MiB before reading it, with the JSON envelope and the message the app gives.

    Waitress reads a whole body (into a file past 512 KiB) before the app sees it; its own
    limit stops that read early, but answers in plain text, hence the channel below.
    """
    message = too_large_message(max_body_mb)

    class _ErrorTask(ErrorTask):  # type: ignore[misc]
        def execute(self) -> None:
            error = self.request.error
            status = int(error.code)
            text = message if isinstance(error, WaitressTooLarge) else str(error.body)
            body = json.dumps(ErrorEnvelope.for_status(status, text, None).to_json()).encode()
            self.status = f"{status} {error.reason}"
            self.response_headers.append(("Content-Type", "application/json"))
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class _Channel(HTTPChannel):  # type: ignore[misc]
        error_task_class = _ErrorTask

    # waitress refuses a body of max_request_body_size bytes or more: one byte over the limit
    server = waitress.create_server(app, max_request_body_size=max_body_mb * 2**20 + 1, **options)
    for listener in server.map.values() if isinstance(server, MultiSocketServer) else (server,):
        listener.channel_class = _Channel
    return server
