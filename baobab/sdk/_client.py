"""The Python client of the admin API and of the predictors: HTTP only, through ``requests``.

Every call is one or a few HTTP requests under ``<url>/api/v1`` (see the platform's
routes); nothing here touches the database or the artifact store, so the client runs
anywhere the server can be reached. Answers are the API's JSON as plain dicts and
lists; list routes are unwrapped (``list_models()`` returns the list, not
``{"models": [...]}``), paged routes are not (``get_trials`` keeps ``total``).

Failures raise :class:`~baobab.sdk.ApiError` (a non-2xx answer, with the API's code,
message and field) or :class:`~baobab.sdk.ServerUnreachableError` (no answer at all).

:class:`Client` is one class made of a resource group per part of the API (a mixin
each, in a module of its own), all over one :class:`~baobab.sdk._transport.Transport`.
"""

from __future__ import annotations

from baobab.sdk._datasets import Datasets
from baobab.sdk._inference import InferenceJobs
from baobab.sdk._inference_versions import InferenceVersions
from baobab.sdk._models import Models
from baobab.sdk._transport import DEFAULT_URL
from baobab.sdk._trials import Trials
from baobab.sdk._users import Users
from baobab.sdk._zoo import Zoo

__all__ = ["DEFAULT_URL", "Client"]


class Client(Users, Datasets, Models, Trials, InferenceJobs, InferenceVersions, Zoo):
    """A session with one Baobab server.

    Args:
        url: where the admin API is served (``http://HOST:PORT``; a trailing
            ``/api/v1`` is accepted too).
        token: a bearer token from an earlier :meth:`login`, or None to log in.
        timeout: seconds to wait for a connection and, after that, between bytes of
            an answer (an upload the server checks for long may need more); None waits
            forever.

    Example::

        client = Client("http://127.0.0.1:8100")
        client.login("me@example.com", "password")
        train = client.create_dataset("iris-train", "train.csv", format="TABULAR")
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float | None = 60.0) -> None:
        super().__init__(url, token, timeout=timeout)
        self._api_keys: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"Client({self.url!r}, token={'...' if self.token else None})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
