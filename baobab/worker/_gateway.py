"""Where a worker reports on its trial and gets its artifacts: the admin API, with the trial's token.

No worker holds database credentials. A worker calls the admin API with the token
its trial came with, and the API calls the trial-row functions of :mod:`baobab.store`.
A cluster worker reads and writes artifacts at the shared artifact URL; a local
worker (``baobab up``), confined away from the platform's home, reads its trial's
inputs and stores its parameters through the API too (:class:`TrialArtifacts`), so a
template can reach no other trial's artifacts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO, Any, Protocol

import requests

from baobab._http import API_TIMEOUT_S, api_session
from baobab.error_envelope import error_message
from baobab.exceptions import ArtifactError, ArtifactNotFoundError, StoreError
from baobab.store import ArtifactStore, ClaimRefused, TrialClaim, TrialState, params_key

__all__ = ["ApiGateway", "TrialArtifacts", "TrialGateway"]


class TrialGateway(Protocol):
    """How a worker claims, beats, records and finishes one trial (see :mod:`baobab.store._db._trial_rows`)."""

    #: Seconds between heartbeats; None: this gateway needs none (a local executor watches its workers).
    heartbeat_s: float | None

    def claim(self, trial_id: int, worker: str, *, take_over: bool = True) -> TrialClaim | ClaimRefused:
        """Claim the trial; ``take_over`` a trial whose worker went silent (see ``claim_trial``)."""
        ...

    def beat(self, claim: TrialClaim) -> tuple[bool, str | None]: ...

    def records(self, trial_id: int, metrics: Sequence[Mapping[str, Any]], logs: Sequence[Mapping[str, Any]]) -> None:
        """Store interim metrics and log lines (``time`` as an aware datetime)."""
        ...

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None: ...

    def zoo(self) -> Any:
        """The model zoo as this trial may reach it (a :class:`baobab.zoo.ZooClient`); imports torch."""
        ...

    #: Where the trial reads its inputs and stores its parameters.
    artifacts: ArtifactStore | TrialArtifacts


def _jsonable(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "time": row["time"].isoformat()} for row in rows]


class ApiGateway:
    """The admin API at ``api_url``, with the token of one trial.

    Errors reaching the API are :class:`StoreError` (the runner treats them as the
    database failing): the trial is then left to the heartbeat rules, which hand it to
    another worker once this one has been silent long enough.

    Args:
        heartbeat_s: seconds between heartbeats; None where the executor watches the
            worker process itself (a local worker).
        artifacts: the artifact store the worker reaches; None: the trial's own
            artifacts through the API (a confined local worker).
    """

    def __init__(
        self,
        api_url: str,
        trial_id: int,
        token: str,
        *,
        heartbeat_s: float | None,
        session: requests.Session | None = None,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.api_url = api_url
        self.base = api_url.rstrip("/") + "/api/v1/worker/trials"
        self.heartbeat_s = heartbeat_s
        self._http = session or api_session()
        self._token = token
        self._headers = {"Authorization": f"Bearer {token}"}
        self.artifacts: ArtifactStore | TrialArtifacts = (
            artifacts if artifacts is not None else TrialArtifacts(self, trial_id)
        )

    def request(self, method: str, url: str, what: str, **kwargs: Any) -> requests.Response:
        """Send a request with the trial's token; a refusal other than 404 is a :class:`StoreError`."""
        try:
            response = self._http.request(method, url, headers=self._headers, timeout=API_TIMEOUT_S, **kwargs)
        except requests.RequestException as e:  # the retries are spent
            raise StoreError(f"cannot reach the admin API at {url}: {e}") from e
        if response.status_code not in (200, 404):
            message = error_message(response.text, response.status_code)
            raise StoreError(f"the admin API refused {what} ({response.status_code}): {message}")
        return response

    def _post(self, trial_id: int, action: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self.base}/{trial_id}/{action}"
        response = self.request("POST", url, f"{action} of trial {trial_id}", json=body)
        if response.status_code != 200:
            message = error_message(response.text, response.status_code)
            raise StoreError(f"the admin API refused {action} of trial {trial_id} (404): {message}")
        return dict(response.json())

    def claim(self, trial_id: int, worker: str, *, take_over: bool = True) -> TrialClaim | ClaimRefused:
        answer = self._post(trial_id, "claim", {"worker": worker, **({} if take_over else {"take_over": False})})
        if answer.get("claim") is not None:
            return TrialClaim.from_json(answer["claim"])
        refused = answer["refused"]
        status = None if refused["status"] is None else TrialState(refused["status"])
        return ClaimRefused(trial_id, status, refused.get("retry_after_s"))

    def beat(self, claim: TrialClaim) -> tuple[bool, str | None]:
        answer = self._post(claim.trial_id, "beat", {"attempt": claim.attempt})
        return bool(answer["current"]), answer.get("stop_reason")

    def records(self, trial_id: int, metrics: Sequence[Mapping[str, Any]], logs: Sequence[Mapping[str, Any]]) -> None:
        self._post(trial_id, "records", {"metrics": _jsonable(metrics), "logs": _jsonable(logs)})

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None:
        answer = self._post(claim.trial_id, "finish", {"attempt": claim.attempt, "status": status.value, **fields})
        return None if answer["status"] is None else TrialState(answer["status"])

    def zoo(self) -> Any:
        from baobab.zoo import TrialHttpZoo

        return TrialHttpZoo(self.api_url, self._token, session=self._http)


class TrialArtifacts:
    """One trial's artifacts through the admin API: the inputs its claim names, and its parameters.

    It offers the part of :class:`~baobab.store.ArtifactStore` a trial uses. The API
    answers only for that trial's template, datasets and shared parameters.
    """

    is_local = False

    def __init__(self, gateway: ApiGateway, trial_id: int) -> None:
        self._gateway = gateway
        self.trial_id = trial_id
        self.url = gateway.api_url

    def open(self, key: str) -> IO[bytes]:
        """Stream an input of the trial."""
        response = self._gateway.request(
            "GET", f"{self._gateway.base}/{self.trial_id}/artifact", f"reading {key}", params={"key": key}, stream=True
        )
        if response.status_code == 404:
            raise ArtifactNotFoundError(f"the admin API has no such input of trial {self.trial_id}", key=key)
        response.raw.decode_content = True
        return response.raw  # type: ignore[no-any-return]

    def get_bytes(self, key: str) -> bytes:
        with self.open(key) as f:
            return f.read()

    def put_bytes(self, key: str, data: bytes) -> str:
        if key != params_key(self.trial_id):
            raise ArtifactError("a trial stores only its own parameters", key=key)
        self._gateway.request("PUT", f"{self._gateway.base}/{self.trial_id}/params", f"storing {key}", data=data)
        return key

    def delete(self, key: str) -> bool:
        if key != params_key(self.trial_id):
            raise ArtifactError("a trial deletes only its own parameters", key=key)
        response = self._gateway.request("DELETE", f"{self._gateway.base}/{self.trial_id}/params", f"deleting {key}")
        return bool(response.json().get("deleted"))
