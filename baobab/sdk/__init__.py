"""The Python client of a Baobab server (the ``baobab`` command line is :mod:`baobab.cli`).

``from baobab.sdk import Client`` talks to a Baobab server over HTTP only: importing
it loads ``requests`` and ``tqdm``, never the server's parts (no SQLAlchemy, no NumPy),
so it installs and runs anywhere the server can be reached.
"""

from __future__ import annotations

from baobab.sdk._client import DEFAULT_URL, Client
from baobab.sdk._errors import ApiError, ClientError, JobFailedError, ServerUnreachableError, WaitTimeoutError

__all__ = [
    "DEFAULT_URL",
    "ApiError",
    "Client",
    "ClientError",
    "JobFailedError",
    "ServerUnreachableError",
    "WaitTimeoutError",
]
