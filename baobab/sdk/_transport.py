"""The HTTP plumbing that the client's resource groups share.

One ``requests`` session, bearer auth, JSON and streamed bodies, and the API's
errors (:mod:`baobab.error_envelope`) decoded into exceptions.

Nothing is retried: a request that fails raises at once (:class:`~baobab.sdk.ApiError`
for a non-2xx answer, :class:`~baobab.sdk.ServerUnreachableError` for none), so a
non-idempotent call (a job created, a user banned) is never sent twice behind the
caller's back.
"""

from __future__ import annotations

import email.message
import json
import os
import socket
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.__version__ import __version__ as REQUESTS_VERSION

from baobab.error_envelope import decode_error, status_code_name
from baobab.sdk._errors import ApiError, ClientError, ServerUnreachableError
from baobab.sdk._multipart import CHUNK, MultipartBody

__all__ = ["API", "DEFAULT_URL", "BearerAuth", "Json", "PathLike", "Transport", "base_url", "query_params"]

#: Where ``baobab up`` serves the admin API unless told otherwise.
DEFAULT_URL = "http://127.0.0.1:8100"

#: The admin API's prefix under the server's URL.
API = "/api/v1"
_ERROR_TEXT_CHARS = 300

Json = dict[str, Any]
PathLike = str | os.PathLike[str]


class BearerAuth(requests.auth.AuthBase):
    """``Authorization: Bearer <token>``; set as ``auth`` so that no ``.netrc`` entry replaces it."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request


class Transport:
    """A ``requests`` session with one Baobab server; the resource groups' base class.

    Args:
        url: where the admin API is served (``http://HOST:PORT``; a trailing
            ``/api/v1`` is accepted too).
        token: a bearer token from an earlier ``login``, or None.
        timeout: seconds to wait for a connection and, after that, between bytes of
            an answer; None waits forever.
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float | None = 60.0) -> None:
        self.url = base_url(url)
        self.token = token
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers["User-Agent"] = f"baobab-sdk requests/{REQUESTS_VERSION}"

    def close(self) -> None:
        """Closes the pooled connections."""
        self._session.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        auth: bool = True,
        deprecated: str = "",
    ) -> Any:
        """One request to the admin API; the decoded JSON answer, or None for 204.

        Args:
            deprecated: what to do instead, said in the DeprecationWarning raised (at the caller of
                the client's method) when the answer carries a ``Deprecation`` header.
        """
        response = self._send_api(method, path, json=json, params=params, auth=auth)
        if "Deprecation" in response.headers:
            warnings.warn(
                f"{method} {API}{path}: the server deprecates this form of the request "
                f"(Deprecation: {response.headers['Deprecation']}); {deprecated or 'see the API document'}",
                DeprecationWarning,
                stacklevel=3,
            )
        if response.status_code == 204:
            return None
        return _decode(response)

    def _upload(self, path: str, fields: Mapping[str, str], file: Path, file_type: str) -> Json:
        try:
            body = MultipartBody(fields, "file", file, file_type)
        except OSError as e:
            raise ClientError(f"cannot read {file}: {e.strerror or e}") from None
        try:
            response = self._send_api("POST", path, data=body, headers={"Content-Type": body.content_type})
        finally:
            body.close()
        return _decode(response)

    def _download(self, path: str, dest: PathLike | None, fallback_name: str) -> Path:
        response = self._send_api("GET", path, stream=True)
        with response:
            name = _attachment_name(response) or fallback_name
            target = Path(dest) if dest is not None else Path(name)
            if target.is_dir():
                target = target / name
            # Written beside the target, then renamed: a broken download leaves no half file.
            fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in response.iter_content(CHUNK):
                        out.write(chunk)
                os.replace(partial, target)
            except BaseException:
                os.unlink(partial)
                raise
        return target

    def _send_api(self, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> requests.Response:
        """A request to the admin API at ``path`` (under ``/api/v1``), with the token unless ``auth`` is False."""
        token = BearerAuth(self.token) if auth and self.token else None
        return self._send(method, self.url + API + path, self.url, "the Baobab server", auth=token, **kwargs)

    def _send(
        self, method: str, url: str, base: str, what: str, *, json: Any = None, auth: Any = None, **kwargs: Any
    ) -> requests.Response:
        """Sends a request; raises :class:`ApiError` for a non-2xx answer and
        :class:`ServerUnreachableError` when no answer comes."""
        if json is not None:
            kwargs["data"] = _dumps(json)
            kwargs["headers"] = {**kwargs.get("headers", {}), "Content-Type": "application/json"}
        try:
            response = self._session.request(method, url, auth=auth, timeout=self.timeout, **kwargs)
        except requests.Timeout:
            limit = f"within {self.timeout:g} s" if self.timeout is not None else "in time"
            raise ServerUnreachableError(f"{what} at {base} did not answer {limit}", url=base) from None
        except requests.ConnectionError as e:
            raise ServerUnreachableError(_connection_message(e, base, what), url=base) from None
        if not 200 <= response.status_code < 300:
            with response:
                raise _api_error(response, base)
        return response


def base_url(url: str, *, api: bool = True) -> str:
    """``url`` without a trailing slash (nor a trailing ``/api/v1`` for the admin API)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL; expected e.g. {DEFAULT_URL}")
    url = url.rstrip("/")
    if api and url.endswith(API):
        url = url[: -len(API)]
    return url


def query_params(**values: Any) -> dict[str, Any]:
    """The query string's values, without those left out (None): the API reads a missing filter as "any"."""
    return {name: value for name, value in values.items() if value is not None}


def _dumps(body: Any) -> bytes:
    def default(value: Any) -> Any:  # NumPy arrays and scalars, without importing NumPy
        if hasattr(value, "tolist"):
            return value.tolist()
        raise TypeError(f"{type(value).__name__} cannot be sent as JSON")

    return json.dumps(body, default=default).encode("utf-8")


def _decode(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("Content-Type", "no content type").split(";")[0]
        raise ClientError(
            f"{response.url} answered {response.status_code} with {kind}, not JSON; is this the URL of a Baobab server?"
        ) from None


def _api_error(response: requests.Response, base: str) -> ApiError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    envelope = decode_error(body, status)
    if envelope is not None:
        return ApiError(status, envelope.code, envelope.message, envelope.field, body=body)
    # Not Baobab's error body: a proxy, another server on that port, a crash before the app.
    text = " ".join(response.text.split())
    if len(text) > _ERROR_TEXT_CHARS:
        text = text[:_ERROR_TEXT_CHARS] + "..."
    kind = response.headers.get("Content-Type", "no content type").split(";")[0]
    message = f"{response.request.method} {response.url} answered {status} {response.reason or ''}".rstrip()
    message += f" with {kind}" + (f": {text}" if text else "")
    if body is None:
        message += f" (not a Baobab error; is {base} the right URL?)"
    return ApiError(status, status_code_name(status), message, None, body=body)


def _connection_message(error: requests.ConnectionError, base: str, what: str) -> str:
    cause = _root_cause(error)
    if isinstance(cause, ConnectionRefusedError):
        hint = "is `baobab up` running, and is this its URL?" if what == "the Baobab server" else "is it running?"
        return f"cannot connect to {what} at {base}: connection refused; {hint}"
    if isinstance(cause, socket.gaierror):
        return f"cannot connect to {what} at {base}: unknown host ({cause.strerror or cause})"
    reason = getattr(cause, "strerror", None) or str(cause)
    return f"cannot connect to {what} at {base}: {reason}"


def _root_cause(error: BaseException) -> BaseException:
    """The innermost exception behind requests' and urllib3's wrappers (an ``OSError`` mostly)."""
    seen: set[int] = set()
    current: BaseException = error
    while id(current) not in seen:
        seen.add(id(current))
        nested = getattr(current, "reason", None)
        if not isinstance(nested, BaseException):
            nested = next((arg for arg in current.args if isinstance(arg, BaseException)), None)
        if nested is None:
            nested = current.__cause__ or current.__context__
        if nested is None:
            break
        current = nested
    return current


def _attachment_name(response: requests.Response) -> str | None:
    """The file name in ``Content-Disposition``, stripped of any folder."""
    header = response.headers.get("Content-Disposition")
    if not header:
        return None
    message = email.message.Message()
    message["Content-Disposition"] = header
    name = message.get_filename()
    if not name:
        return None
    name = os.path.basename(name.replace("\\", "/"))
    return name if name not in ("", ".", "..") else None
