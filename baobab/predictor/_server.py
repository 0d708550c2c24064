"""The predictor's HTTP API: ``POST /predict``, ``GET /health``, ``GET /metrics`` (:mod:`._telemetry`) and
``GET /stats`` (:mod:`._history`).

Each request is answered by one version of the job (:mod:`baobab.predictor._router`),
which the answer names (``"version"``).

Errors answer like the admin API's, with the envelope of :mod:`baobab.error_envelope`;
401 adds ``WWW-Authenticate: Bearer``. The JSON body is parsed strictly: ``NaN`` and
``Infinity`` are not JSON and are refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

from flask import Flask, Response, request
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

__all__ = ["MAX_BODY_BYTES", "create_app"]

logger = logging.getLogger("baobab.predictor")

#: The largest request body, in bytes (64 MiB: a few thousand images).
MAX_BODY_BYTES = 64 * 2**20
_BODY_FIELDS = ("queries",)


class _Unavailable(Exception):
    """No member answered (503)."""


def create_app(
    job: PredictorJob, router: VersionRouter, request_log: RequestLog | None = None, history: History | None = None
) -> Flask:
    """The WSGI app serving ``job`` through the versions of ``router``; answers go to ``request_log`` too, and
    ``GET /stats`` answers ``history``'s points."""
    app = Flask("baobab.predictor")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
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
