"""Where a worker reports on its trial: the database itself, or the admin API.

A local worker (``baobab up``) holds the database and calls the trial-row functions of
:mod:`baobab.store` directly. A cluster worker (``baobab worker``) holds no database
credentials: it calls the admin API with the trial's token, and the API calls the same
functions. The runner sees one interface either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import requests
from sqlalchemy import Engine

from baobab._http import API_TIMEOUT_S, api_session
from baobab.exceptions import StoreError
from baobab.store import (
    ArtifactStore,
    ClaimRefused,
    TrialClaim,
    TrialState,
    add_trial_records,
    beat_trial,
    claim_trial,
    finish_trial,
)

__all__ = ["ApiGateway", "DatabaseGateway", "TrialGateway"]


def _now() -> datetime:
    return datetime.now(UTC)


class TrialGateway(Protocol):
    """How a worker claims, beats, records and finishes one trial (see :mod:`baobab.store._db._trial_rows`)."""

    #: Seconds between heartbeats; None: this gateway needs none (a local executor watches its workers).
    heartbeat_s: float | None

    def claim(self, trial_id: int, worker: str) -> TrialClaim | ClaimRefused: ...

    def beat(self, claim: TrialClaim) -> tuple[bool, str | None]: ...

    def records(self, trial_id: int, metrics: Sequence[Mapping[str, Any]], logs: Sequence[Mapping[str, Any]]) -> None:
        """Store interim metrics and log lines (``time`` as an aware datetime)."""
        ...

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None: ...

    def zoo(self, artifacts: ArtifactStore) -> Any:
        """The model zoo as this trial may reach it (a :class:`baobab.zoo.ZooClient`); imports torch."""
        ...


class DatabaseGateway:
    """The database itself: what a local worker uses.

    Args:
        engine: the metadata store.
        zoo_budget_bytes: the zoo's storage budget, kept after each model this worker registers.
    """

    heartbeat_s: float | None = None

    def __init__(self, engine: Engine, *, zoo_budget_bytes: int | None = None) -> None:
        self.engine = engine
        self.zoo_budget_bytes = zoo_budget_bytes
        self._zoo: Any = None

    def claim(self, trial_id: int, worker: str) -> TrialClaim | ClaimRefused:
        return claim_trial(self.engine, trial_id, worker, now=_now())

    def beat(self, claim: TrialClaim) -> tuple[bool, str | None]:
        return beat_trial(self.engine, claim.trial_id, claim.attempt, now=_now())

    def records(self, trial_id: int, metrics: Sequence[Mapping[str, Any]], logs: Sequence[Mapping[str, Any]]) -> None:
        add_trial_records(self.engine, trial_id, metrics, logs)

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None:
        return finish_trial(self.engine, claim.trial_id, claim.attempt, status, now=_now(), **fields)

    def zoo(self, artifacts: ArtifactStore) -> Any:
        from baobab.zoo import DbZoo

        if self._zoo is None:  # one per worker process: it caches the zoo's graph features
            self._zoo = DbZoo(self.engine, artifacts, budget_bytes=self.zoo_budget_bytes)
        return self._zoo


def _jsonable(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "time": row["time"].isoformat()} for row in rows]


class ApiGateway:
    """The admin API at ``api_url``, with the token of one trial: what a cluster worker uses.

    Errors reaching the API are :class:`StoreError` (the runner treats them as the
    database failing): the trial is then left to the heartbeat rules, which hand it to
    another worker once this one has been silent long enough.
    """

    def __init__(
        self, api_url: str, token: str, *, heartbeat_s: float, session: requests.Session | None = None
    ) -> None:
        self.api_url = api_url
        self.base = api_url.rstrip("/") + "/api/v1/worker/trials"
        self.heartbeat_s: float | None = heartbeat_s
        self._http = session or api_session()
        self._token = token
        self._headers = {"Authorization": f"Bearer {token}"}

    def _post(self, trial_id: int, action: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self.base}/{trial_id}/{action}"
        try:
            response = self._http.post(url, json=body, headers=self._headers, timeout=API_TIMEOUT_S)
        except requests.RequestException as e:  # the retries are spent
            raise StoreError(f"cannot reach the admin API at {url}: {e}") from e
        if response.status_code != 200:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            raise StoreError(f"the admin API refused {action} of trial {trial_id} ({response.status_code}): {message}")
        return dict(response.json())

    def claim(self, trial_id: int, worker: str) -> TrialClaim | ClaimRefused:
        answer = self._post(trial_id, "claim", {"worker": worker})
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

    def zoo(self, artifacts: ArtifactStore) -> Any:
        from baobab.zoo import TrialHttpZoo

        return TrialHttpZoo(self.api_url, self._token, session=self._http)
