"""The error envelope every Baobab HTTP server answers with, and every Baobab client reads.

A failed request answers ``{"error": {"code", "message", "field"}}``: ``code`` is the
HTTP status in words (``"not_found"``), ``message`` says what is wrong and how to fix
it, ``field`` names the request field at fault, or is null. The admin API and the
predictor write it; the SDK, the worker gateway and the zoo client read it. This
module is the one place that knows its shape, and it imports only the standard
library, so the SDK may use it without the servers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["ErrorEnvelope", "decode_error", "error_message", "status_code_name"]

#: The names the API has always answered for statuses that Python 3.13 renamed (RFC 9110),
#: so that a client's ``code`` does not depend on the server's Python.
_STABLE_NAMES = {
    413: "request_entity_too_large",
    414: "request_uri_too_long",
    416: "requested_range_not_satisfiable",
    422: "unprocessable_entity",
}
#: How much of a body that is not an envelope (a proxy's HTML page) a message quotes.
_TEXT_CHARS = 200


def status_code_name(status: int) -> str:
    """The ``code`` of an error with HTTP ``status``: its reason phrase in snake case (404: ``"not_found"``)."""
    if status in _STABLE_NAMES:
        return _STABLE_NAMES[status]
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return "error"
    return phrase.lower().replace(" ", "_").replace("-", "_")


@dataclass(frozen=True)
class ErrorEnvelope:
    """One error answer's content (see the module docstring)."""

    code: str
    message: str
    field: str | None = None

    @classmethod
    def for_status(cls, status: int, message: str, field: str | None = None) -> ErrorEnvelope:
        """The envelope of an error answered with HTTP ``status``."""
        return cls(status_code_name(status), message, field)

    def to_json(self) -> dict[str, Any]:
        """The answer's body."""
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


def decode_error(body: Any, status: int) -> ErrorEnvelope | None:
    """The envelope in a decoded JSON ``body`` answered with ``status``; None when ``body`` is not one.

    Only ``message`` must be there (a string): a missing or odd ``code`` is named from
    ``status``, and a ``field`` that is not a string is left out.
    """
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    code, field = error.get("code"), error.get("field")
    return ErrorEnvelope(
        code if isinstance(code, str) else status_code_name(status),
        error["message"],
        field if isinstance(field, str) else None,
    )


def error_message(text: str, status: int) -> str:
    """The message of an error answer whose body is ``text``; the start of ``text`` when it holds no envelope."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    envelope = decode_error(body, status)
    return envelope.message if envelope is not None else text[:_TEXT_CHARS]
