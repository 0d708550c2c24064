"""The REST errors and the one handler that turns every error into JSON.

Every error answers the envelope of :mod:`baobab.error_envelope`:
``{"error": {"code", "message", "field"}}``.

Errors a client caused (a :class:`~baobab.exceptions.BaobabError`, or werkzeug's
HTTP exceptions) keep their message. Anything else, and the server-side Baobab
errors (a failing store, bad settings), is logged with its traceback and answered
as a bare 500: its message may hold paths, SQL or hostnames.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from baobab.error_envelope import ErrorEnvelope
from baobab.exceptions import (
    ArtifactNotFoundError,
    AuthenticationError,
    BaobabError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    RequestError,
    SettingsError,
    StoreError,
)

__all__ = ["register_error_handlers"]

logger = logging.getLogger("baobab.admin")


# Looked up along the exception's MRO; a BaobabError not listed is the client's fault (400).
_STATUS: dict[type[BaseException], int] = {
    RequestError: 400,
    AuthenticationError: 401,
    PermissionDeniedError: 403,
    NotFoundError: 404,
    ArtifactNotFoundError: 404,
    ConflictError: 409,
    BaobabError: 400,
}
_SERVER_SIDE = (StoreError, SettingsError)


def register_error_handlers(app: Flask) -> None:
    """Routes every exception a view raises through :func:`handle_error`."""
    app.register_error_handler(Exception, handle_error)


def handle_error(e: Exception) -> Response:
    """The JSON answer to ``e`` (see the module docstring)."""
    if isinstance(e, HTTPException) and e.code is not None:
        # Keep werkzeug's headers (Allow on a 405), but not its HTML content type.
        headers = [(k, v) for k, v in e.get_headers() if k.lower() != "content-type"]
        return _error_response(e.code, e.description or HTTP_STATUS_CODES[e.code], None, headers)
    if isinstance(e, BaobabError) and not isinstance(e, _SERVER_SIDE):
        status = next(_STATUS[cls] for cls in type(e).__mro__ if cls in _STATUS)
        headers = [("WWW-Authenticate", "Bearer")] if status == 401 else []
        return _error_response(status, str(e), getattr(e, "field", None), headers)
    logger.error("unhandled error in the admin API", exc_info=e)
    return _error_response(500, "internal error: the server logged the details", None, [])


def _error_response(status: int, message: str, field: str | None, headers: list[tuple[str, str]]) -> Response:
    response = jsonify(ErrorEnvelope.for_status(status, message, field).to_json())
    response.status_code = status
    response.headers.extend(headers)
    return response
