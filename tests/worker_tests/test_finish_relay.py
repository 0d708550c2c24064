"""One request a trial: a cluster worker's trial outcome goes with the claim of its next trial (FinishRelay).

Real trials of the probe template, through the real admin API on loopback, on SQLite and
PostgreSQL. What is checked is what the rows say (the outcome is stored in the request of
the next claim, in the same transaction) and the API's own request counts, and what
happens when a part of that request is refused.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client import REGISTRY
from worker_world import Platform

from baobab.exceptions import StoreError
from baobab.store import ClaimRefused, TrialState, claim_trial, issue_trial_token, params_key
from baobab.testing import wait_until
from baobab.worker import ApiGateway, FinishRelay, WorkerResources, run_trial
from baobab.worker._recorder import RowWriter

#: Longer than any test: an outcome goes only with a claim, or when flushed.
FOREVER_S = 600.0


@pytest.fixture
def resources(tmp_path: Path) -> WorkerResources:
    return WorkerResources(cache_dir=tmp_path / "worker-cache", name="relay-worker")


def _gateway(platform: Platform, trial_id: int, relay: FinishRelay) -> ApiGateway:
    token = issue_trial_token(platform.settings.signing_key(), trial_id)
    return ApiGateway(platform.api_url, trial_id, token, heartbeat_s=None, artifacts=platform.artifacts, relay=relay)


def _requests(action: str) -> float:
    """POSTs the API answered 200 on ``/api/v1/worker/trials/<id>/<action>`` so far (its own count)."""
    labels = {"route": f"/api/v1/worker/trials/<int:trial_id>/{action}", "method": "POST", "status": "200"}
    return REGISTRY.get_sample_value("baobab_api_requests_total", labels) or 0.0


def test_an_outcome_goes_with_the_next_claim_in_one_request(platform: Platform, resources: WorkerResources) -> None:
    relay = FinishRelay(FOREVER_S)
    first, second = platform.add_trial("ok", 0.25), platform.add_trial("ok", 0.75)
    claims, finishes = _requests("claim"), _requests("finish")

    outcome = run_trial(first, resources, gateway=_gateway(platform, first, relay))
    assert outcome.ran and outcome.status is TrialState.COMPLETED and outcome.score == 0.25  # as sent
    assert platform.trial(first).status is TrialState.RUNNING  # held for the next claim
    assert (_requests("claim"), _requests("finish")) == (claims + 1, finishes)

    outcome = run_trial(second, resources, gateway=_gateway(platform, second, relay))
    assert outcome.ran and outcome.status is TrialState.COMPLETED
    done, running = platform.trial(first), platform.trial(second)
    assert done.status is TrialState.COMPLETED and done.score == 0.25 and done.params_path == params_key(first)
    assert running.status is TrialState.RUNNING and running.worker == "relay-worker"
    # One transaction: the first trial ended at the instant the second was claimed.
    assert done.finished_at == running.started_at
    # Every interim row of the first trial is stored, whichever request carried it.
    assert platform.metrics(first) == [(1, {"loss": 0.5, "accuracy": None})]
    assert platform.logs(first)[1:] == ["progress 100%", "step one done"]
    assert (_requests("claim"), _requests("finish")) == (claims + 1, finishes + 1)

    relay.flush()  # the worker process ends: what it holds goes alone
    assert platform.trial(second).status is TrialState.COMPLETED
    assert (_requests("claim"), _requests("finish")) == (claims + 1, finishes + 2)


def test_an_outcome_no_claim_comes_for_goes_alone_after_the_wait(
    platform: Platform, resources: WorkerResources
) -> None:
    relay = FinishRelay(0.05)
    trial_id = platform.add_trial("ok", 0.5)
    run_trial(trial_id, resources, gateway=_gateway(platform, trial_id, relay))
    wait_until(lambda: platform.trial(trial_id).status is TrialState.COMPLETED, timeout=10, what="the outcome")


def test_an_outcome_whose_claim_was_lost_meanwhile_is_not_stored_and_its_parameters_go(
    platform: Platform, resources: WorkerResources
) -> None:
    relay = FinishRelay(FOREVER_S)
    first, second = platform.add_trial("ok", 0.25), platform.add_trial("ok", 0.75)
    run_trial(first, resources, gateway=_gateway(platform, first, relay))
    assert platform.artifacts.exists(params_key(first)) and params_key(first) in resources.produced
    platform.set_status(first, TrialState.CANCELLED)  # what CeleryExecutor.cancel writes, while it waits

    run_trial(second, resources, gateway=_gateway(platform, second, relay))
    assert platform.trial(first).status is TrialState.CANCELLED  # the late outcome was refused
    assert not platform.artifacts.exists(params_key(first))  # and no orphan parameters are kept
    assert platform.trial(second).status is TrialState.RUNNING  # the claim in the same request stood
    relay.flush()
    assert platform.trial(second).status is TrialState.COMPLETED


def test_a_next_trial_held_by_a_live_worker_is_refused_and_the_outcome_is_still_stored(
    platform: Platform, resources: WorkerResources
) -> None:
    relay = FinishRelay(FOREVER_S)
    first, second = platform.add_trial("ok", 0.25), platform.add_trial("ok", 0.75)
    run_trial(first, resources, gateway=_gateway(platform, first, relay))
    # A second delivery of `second` while another worker runs it: the claim is refused, to be asked again.
    claim_trial(platform.engine, second, "other-worker", now=datetime.now(UTC))
    gateway = _gateway(platform, second, relay)

    claimed = gateway.claim(second, resources.name, take_over=True)
    assert isinstance(claimed, ClaimRefused) and claimed.status is TrialState.RUNNING
    assert claimed.retry_after_s is not None and 0 < claimed.retry_after_s <= platform.settings.heartbeat_timeout_s
    assert platform.trial(first).status is TrialState.COMPLETED
    assert platform.trial(second).worker == "other-worker"


class _Down(requests.adapters.BaseAdapter):
    """The admin API gone: every request fails to connect."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        raise requests.ConnectionError("connection refused")

    def close(self) -> None:
        pass


def test_an_api_that_cannot_be_reached_fails_the_next_claim_and_leaves_the_held_trial_to_the_heartbeat_rules(
    platform: Platform, resources: WorkerResources
) -> None:
    relay, http = FinishRelay(FOREVER_S), requests.Session()  # no retries: the outage is at once
    first, second = platform.add_trial("ok", 0.25), platform.add_trial("ok", 0.75)
    signing_key = platform.settings.signing_key()
    gateways = [
        ApiGateway(platform.api_url, trial_id, issue_trial_token(signing_key, trial_id), heartbeat_s=None,
                   session=http, artifacts=platform.artifacts, relay=relay)
        for trial_id in (first, second)
    ]  # fmt: skip
    run_trial(first, resources, gateway=gateways[0])
    http.mount("http://", _Down())

    with pytest.raises(StoreError, match="cannot reach the admin API"):  # the Celery task retries later
        run_trial(second, resources, gateway=gateways[1])
    # The outcome went with the failed request: the trial stays RUNNING, to be handed out again by the job
    # driver once its heartbeat is stale, as a trial of a worker that died; nothing is left to send.
    assert platform.trial(first).status is TrialState.RUNNING and relay.take() is None
    assert platform.trial(second).status is TrialState.PENDING


def test_rows_a_trial_had_not_sent_when_it_ended_are_handed_back_for_its_final_state() -> None:
    blocked, release = threading.Event(), threading.Event()
    written: list[tuple[int, list[dict], list[dict]]] = []

    def write(trial_id: int, metrics, logs) -> None:  # a records request that takes a while
        blocked.set()
        release.wait(10)
        written.append((trial_id, list(metrics), list(logs)))

    writer = RowWriter(write)
    writer.add(7, "metric", {"step": 1})
    assert blocked.wait(10)  # the first row is on its way
    writer.add(7, "metric", {"step": 2})
    writer.add(7, "log", {"line": "done"})
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    metrics, logs = writer.take_rest()
    assert time.monotonic() - started >= 0.1  # it waited for the row on its way
    assert written == [(7, [{"step": 1}], [])]  # which was stored by itself
    assert (metrics, logs) == ([{"step": 2}], [{"line": "done"}])  # the rest goes with the final state
