"""Where a worker reports on its trial and gets its artifacts: the admin API, with the trial's token.

No worker holds database credentials. A worker calls the admin API with the token
its trial came with, and the API calls the trial-row functions of :mod:`baobab.store`.

A finish request carries a trial's outcome with its interim metrics and log lines not
sent yet. By default a cluster worker sends it before the trial's task returns, so the
outcome is stored before Celery acknowledges the trial's message. With
``BAOBAB_FINISH_WAIT_S`` above 0, the outcome instead waits in the process's
:class:`FinishRelay` (while Celery hands the process its next trial) and goes with the
claim of that next trial, one request for both; when no next trial comes in time, it goes
alone. It is then stored after Celery acknowledged the trial's message: a worker machine
that dies in that moment loses it, and the trial, RUNNING with a heartbeat that stopped,
is handed out again by the job driver like any trial of a dead worker.
Every worker process (of ``baobab up`` or of a Celery pool process), confined away from
the platform's home and the artifact store, reads its trial's inputs and stores its
parameters through the API too (:class:`TrialArtifacts`), so a template can reach no
other trial's artifacts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

import requests

from baobab._http import API_TIMEOUT_S, api_session
from baobab.error_envelope import error_message
from baobab.exceptions import ArtifactError, ArtifactNotFoundError, StoreError
from baobab.store import ArtifactStore, ClaimRefused, TrialClaim, TrialState, params_key

__all__ = ["ApiGateway", "FinishRelay", "TrialArtifacts", "TrialGateway"]

logger = logging.getLogger("baobab.worker")

#: What a finish's caller is told once the outcome is stored: the state the trial has then.
OnStored = Callable[[TrialState | None], None]
#: Interim rows a finish carries at most; more go in a records request first.
_ROWS_PER_FINISH = 1000


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

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None:
        """Store the final state (with ``metrics`` and ``logs``: interim rows not sent yet); the state the
        trial has now."""
        ...

    def finish_soon(self, claim: TrialClaim, status: TrialState, on_stored: OnStored, **fields: Any) -> None:
        """:meth:`finish`, now or with this worker's next claim (one request); ``on_stored`` gets the
        state the trial has once it is stored (not called when the request fails)."""
        ...

    def zoo(self) -> Any:
        """The model zoo as this trial may reach it (a :class:`baobab.zoo.ZooClient`); imports torch."""
        ...

    #: Where the trial reads its inputs and stores its parameters.
    artifacts: ArtifactStore | TrialArtifacts


def _jsonable(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "time": row["time"].isoformat()} for row in rows]


@dataclass(frozen=True)
class _Finish:
    """A finish request waiting for the next claim: the finished trial's gateway, body and caller."""

    gateway: ApiGateway
    trial_id: int
    body: dict[str, Any]
    on_stored: OnStored

    def answered(self, status: str | None) -> None:
        try:
            self.on_stored(None if status is None else TrialState(status))
        except Exception:  # what follows a stored outcome must not fail the next trial
            logger.exception("trial %d: handling its stored outcome failed", self.trial_id)


class FinishRelay:
    """Holds the outcome of a worker process's last trial until its next claim takes it (see the module docstring).

    One per worker process; its trials run one at a time. A thread sends an outcome
    alone once it has waited ``wait_s``; a claim waits for such a send in flight, so the
    outcome of a trial is always stored before the next trial of the process is claimed.

    Args:
        wait_s: how long an outcome waits for a next claim: longer than Celery takes to hand
            the process its next message, short against what the job driver may wait for it.
    """

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._held: _Finish | None = None
        self._due = 0.0
        self._lock = threading.Lock()  # held while an outcome is sent
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, finish: _Finish) -> None:
        self.flush()  # one held at a time (each unit of work's first claim takes it): any other goes first
        with self._wake:
            self._held, self._due = finish, time.monotonic() + self.wait_s
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="baobab-finish-relay", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    def take(self) -> _Finish | None:
        """The outcome held, for a claim to carry; the caller sends it (holding :attr:`sending`)."""
        with self._wake:
            held, self._held = self._held, None
            return held

    @property
    def sending(self) -> threading.Lock:
        """Held while an outcome is on its way: a claim takes it so that it follows what is in flight."""
        return self._lock

    def flush(self) -> None:
        """Send the outcome held, alone, now (the wait ran out, or the process ends)."""
        with self._lock:
            held = self.take()
            if held is not None:
                held.gateway.send_finish(held)

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._held is None or time.monotonic() < self._due:
                    self._wake.wait(None if self._held is None else max(0.0, self._due - time.monotonic()))
            try:
                self.flush()
            except StoreError as e:  # the trial is left to the heartbeat rules (module docstring)
                logger.warning("%s", e)


class ApiGateway:
    """The admin API at ``api_url``, with the token of one trial.

    Errors reaching the API are :class:`StoreError` (the runner treats them as the
    database failing): the trial is then left to the heartbeat rules, which hand it to
    another worker once this one has been silent long enough.

    Args:
        heartbeat_s: seconds between heartbeats; None where the executor watches the
            worker process itself (a local worker).
        artifacts: an artifact store to reach directly, for a trial run beside it (the
            tests); None: the trial's own artifacts through the API, as every worker does.
        relay: where :meth:`finish_soon` leaves the outcome for the process's next claim,
            and where :meth:`claim` finds the last one to carry; None: each goes alone, now.
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
        relay: FinishRelay | None = None,
    ) -> None:
        self.api_url = api_url
        self.base = api_url.rstrip("/") + "/api/v1/worker/trials"
        self.heartbeat_s = heartbeat_s
        self.relay = relay
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
        if self.relay is None:
            return _claimed(trial_id, self._post(trial_id, "claim", {"worker": worker, "take_over": take_over}))
        with self.relay.sending:
            held = self.relay.take()
            if held is None:
                return _claimed(trial_id, self._post(trial_id, "claim", {"worker": worker, "take_over": take_over}))
            nxt = {"trial_id": trial_id, "token": self._token, "worker": worker, "take_over": take_over}
            answer = held.gateway.send_finish(held, nxt)
        return _claimed(trial_id, answer["next"])

    def beat(self, claim: TrialClaim) -> tuple[bool, str | None]:
        answer = self._post(claim.trial_id, "beat", {"attempt": claim.attempt})
        return bool(answer["current"]), answer.get("stop_reason")

    def records(self, trial_id: int, metrics: Sequence[Mapping[str, Any]], logs: Sequence[Mapping[str, Any]]) -> None:
        self._post(trial_id, "records", {"metrics": _jsonable(metrics), "logs": _jsonable(logs)})

    def finish(self, claim: TrialClaim, status: TrialState, **fields: Any) -> TrialState | None:
        stored: list[TrialState | None] = []
        self.send_finish(_Finish(self, claim.trial_id, self._finish_body(claim, status, fields), stored.append))
        return stored[0]

    def finish_soon(self, claim: TrialClaim, status: TrialState, on_stored: OnStored, **fields: Any) -> None:
        finish = _Finish(self, claim.trial_id, self._finish_body(claim, status, fields), on_stored)
        if self.relay is None:
            self.send_finish(finish)
        else:
            self.relay.hold(finish)

    def _finish_body(self, claim: TrialClaim, status: TrialState, fields: dict[str, Any]) -> dict[str, Any]:
        """The finish's body; interim rows past what one finish carries are sent first, as records."""
        metrics, logs = list(fields.pop("metrics", ())), list(fields.pop("logs", ()))
        if len(metrics) + len(logs) > _ROWS_PER_FINISH:
            self.records(claim.trial_id, metrics, logs)
            metrics, logs = [], []
        rows = {"metrics": _jsonable(metrics), "logs": _jsonable(logs)}
        return {"attempt": claim.attempt, "status": status.value, **fields, **{k: v for k, v in rows.items() if v}}

    def send_finish(self, finish: _Finish, nxt: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """POST ``finish`` (with the claim of the ``nxt`` trial), tell its caller, and return the answer."""
        body = finish.body if nxt is None else {**finish.body, "next": dict(nxt)}
        answer = self._post(finish.trial_id, "finish", body)
        finish.answered(answer["status"])
        return answer

    def zoo(self) -> Any:
        from baobab.zoo import TrialHttpZoo

        return TrialHttpZoo(self.api_url, self._token, session=self._http)


def _claimed(trial_id: int, answer: Mapping[str, Any]) -> TrialClaim | ClaimRefused:
    """A claim answer (``claim`` or ``refused``) as the runner takes it."""
    if answer.get("claim") is not None:
        return TrialClaim.from_json(answer["claim"])
    refused = answer["refused"]
    status = None if refused["status"] is None else TrialState(refused["status"])
    return ClaimRefused(trial_id, status, refused.get("retry_after_s"))


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
        return response.raw

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
