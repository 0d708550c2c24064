"""Serving stats end to end: the admin API on loopback, an inference supervisor, a real predictor, the SDK.

The predictor samples its counters every 0.2 s; after real ``/predict`` calls, its
``GET /stats`` and the API's ``GET /api/v1/inference_jobs/<id>/stats`` show them. The
API answers 409 for a job not RUNNING, 502 when the predictor does not answer, 404 to
someone else. SQLite only: the database holds only the job's status and URL.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests
from predictor_world import World, supervise, tabular_frame, two_users_and_a_trial

from baobab.sdk import ApiError
from baobab.store import InferenceJobStatus, LocalEventChannel
from baobab.testing import wait_until

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _refusal(call: Any) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call()
    return refused.value


def _requests(stats: dict[str, Any]) -> int:
    return sum(point["requests"] for point in stats["points"])


def _closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago, and nothing here takes ports at random)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@sqlite_only
def test_stats_show_the_predictors_counters_to_the_owner_while_the_job_runs(
    platform: tuple[World, LocalEventChannel, str],
) -> None:
    world, events, url = platform
    users = two_users_and_a_trial(world, url)
    root, ann, bob, app_name, trial = users.root, users.ann, users.bob, users.app, users.trial
    job = ann.create_inference_job(app_name, k=1)

    starting = _refusal(lambda: ann.get_inference_job_stats(job["id"]))
    assert (starting.status, starting.message) == (
        409, f"inference job {job['id']} is STARTING; it has serving stats once it is RUNNING"
    )  # fmt: skip

    _, halt = supervise(world, events, {job["id"]}, stats_interval_s=0.2)
    try:
        predictor_url = ann.wait_for_inference_job(job["id"], timeout=120)["predictor_url"]
        first = ann.get_inference_job_stats(job["id"])
        assert (first["interval_s"], first["window_s"]) == (0.2, 3600)
        assert _requests(first) == 0  # /health and /stats are no traffic

        # Six answered requests (one of three queries) and one refused: all are requests.
        rows = tabular_frame("diabetes").drop(columns="target").to_numpy()
        for i in range(5):
            ann.predict([rows[i].tolist()], inference_job_id=job["id"])
        ann.predict(rows[5:8].tolist(), inference_job_id=job["id"])
        assert _refusal(lambda: ann.predict([[1.0]], inference_job_id=job["id"])).status == 400
        stats = wait_until(
            lambda: (s := ann.get_inference_job_stats(job["id"])) and _requests(s) == 7 and s,
            what="the 7 requests in the stats",
        )
        busy = [p for p in stats["points"] if p["requests"]]
        for point in busy:
            assert point["requests_per_s"] > 0
            assert 0 < point["p50_ms"] <= point["p99_ms"] <= 30_000  # the highest finite bucket: 30 s
        batched = [p["batch_size"] for p in stats["points"] if p["batch_size"] is not None]
        assert batched and all(1 <= size <= 3 for size in batched)  # 1 query a batch, 3 in one; the refused none
        assert all(p["p50_ms"] is None and p["batch_size"] is None for p in stats["points"] if not p["requests"])

        # The predictor's own /stats needs no key, holds no key, and is what the API relays.
        direct = requests.get(f"{predictor_url}/stats", timeout=5)
        assert direct.status_code == 200 and job["api_key"] not in direct.text
        assert _requests(direct.json()) == 7

        # The owner and the admins read them; to anyone else the job is not there.
        assert _requests(root.get_inference_job_stats(job["id"])) == 7
        hidden = _refusal(lambda: bob.get_inference_job_stats(job["id"]))
        assert (hidden.status, hidden.message) == (404, f"no inference job with id {job['id']}")

        # A RUNNING job whose predictor does not answer.
        lost_id, _ = world.inference_job(
            [trial.trial_id], status=InferenceJobStatus.RUNNING, predictor_url=f"http://127.0.0.1:{_closed_port()}"
        )
        lost = _refusal(lambda: ann.get_inference_job_stats(lost_id))
        assert (lost.status, lost.message) == (
            502, f"the predictor of inference job {lost_id} does not answer (ConnectionError)"
        )  # fmt: skip

        ann.stop_inference_job(job["id"])
        stopped = _refusal(lambda: ann.get_inference_job_stats(job["id"]))
        assert (stopped.status, stopped.message) == (
            409, f"inference job {job['id']} is STOPPED; it has serving stats once it is RUNNING"
        )  # fmt: skip
    finally:
        halt()
