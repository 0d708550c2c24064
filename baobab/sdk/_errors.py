"""The errors the client raises: what the API answered, or why it could not answer.

    BaobabError
    └── ClientError               the client could not get what it asked for
        ├── ApiError              the server answered a non-2xx status (its error body is kept)
        ├── ServerUnreachableError    no answer: connection refused, DNS, timeout
        ├── WaitTimeoutError      a ``wait_for_*`` call ran past its time limit
        └── JobFailedError        a job waited for ended without reaching the state asked for

They derive from :class:`baobab.exceptions.BaobabError` (a stdlib-only module), so one
``except BaobabError`` catches both local and remote failures.
"""

from __future__ import annotations

from typing import Any

from baobab.exceptions import BaobabError

__all__ = ["ApiError", "ClientError", "JobFailedError", "ServerUnreachableError", "WaitTimeoutError"]


class ClientError(BaobabError):
    """Base class of the errors :class:`baobab.sdk.Client` raises."""


class ApiError(ClientError):
    """The server answered a non-2xx status.

    Attributes:
        status: the HTTP status (404).
        code: the status in words as the API names it (``"not_found"``).
        message: what is wrong and how to fix it, as the server said it.
        field: the request field at fault, or None.
        body: the decoded JSON error body, or None when the answer was not JSON.
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None, *, body: Any = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body
        text = f"HTTP {status} {code}: {message}"
        super().__init__(f"{text} (field {field!r})" if field else text)

    def __reduce__(self) -> tuple[Any, ...]:  # keeps the keyword argument through pickling
        return (_rebuild_api_error, (self.status, self.code, self.message, self.field, self.body))


def _rebuild_api_error(status: int, code: str, message: str, field: str | None, body: Any) -> ApiError:
    return ApiError(status, code, message, field, body=body)


class ServerUnreachableError(ClientError, ConnectionError):
    """No HTTP answer came back from ``url`` (refused, unknown host, timed out)."""

    def __init__(self, message: str, *, url: str) -> None:
        self.url = url
        super().__init__(message)


class WaitTimeoutError(ClientError, TimeoutError):
    """A ``wait_for_*`` call ran past its ``timeout``; ``last`` is the last JSON seen."""

    def __init__(self, message: str, *, last: dict[str, Any] | None = None) -> None:
        self.last = last
        super().__init__(message)


class JobFailedError(ClientError):
    """A job being waited for ended without reaching the state asked for; ``job`` is its JSON."""

    def __init__(self, message: str, *, job: dict[str, Any]) -> None:
        self.job = job
        super().__init__(message)
