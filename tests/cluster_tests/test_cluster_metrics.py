"""The cluster's ``/metrics``: the API under gunicorn (two processes), the advisor, and a worker whose trials run
in its Celery pool processes while its main process answers the scrape, all adding up what they did."""

from __future__ import annotations

from pathlib import Path

import requests
from cluster_jobs import start_slow_job
from conftest import StartCluster

from baobab.testing import scrape, wait_until

TRIALS = 4


def test_each_service_counts_what_it_did_across_its_processes(start_cluster: StartCluster, breast_cancer: Path) -> None:
    cluster = start_cluster(workers=1, slots=2)  # one worker machine, two pool processes
    services, client = cluster.services, cluster.client
    job = start_slow_job(cluster, breast_cancer, app="metered", trials=TRIALS, sleep_s=0.3)
    done = client.wait_for_train_job("metered", job["app_version"], timeout=120, progress=False)
    assert done["status"] == "COMPLETED" and done["trial_counts"]["COMPLETED"] == TRIALS

    # The worker: its main process runs no trial, yet it answers for those its pool processes ran.
    (worker,) = services.workers
    assert worker.metrics_url is not None
    ran = scrape(worker.metrics_url)
    assert ran.value("baobab_worker_trials_total", state="COMPLETED") == TRIALS
    for phase in ("fetch", "build", "train", "evaluate", "store"):
        assert ran.value("baobab_worker_phase_seconds_count", phase=phase) == TRIALS, phase
    assert ran.value("baobab_worker_phase_seconds_sum", phase="train") >= TRIALS * 0.3  # SlowScorer sleeps in train()

    # The advisor: the driver's own process.
    (advisor,) = services.advisors
    assert advisor.metrics_url is not None
    driven = scrape(advisor.metrics_url)
    assert driven.value("baobab_driver_trials_started_total") == TRIALS
    assert driven.value("baobab_driver_trials_finished_total", state="COMPLETED") == TRIALS
    assert driven.total("baobab_driver_proposal_seconds_count") == TRIALS
    # the slots the worker reports (its pool size), read by the executor every few seconds
    wait_until(lambda: scrape(advisor.metrics_url).value("baobab_driver_slots") == 2, what="the worker's 2 slots")

    # The API: whichever gunicorn process a request or a scrape reaches, every scrape tells the same total.
    users = {"route": "/api/v1/users", "method": "GET", "status": "200"}
    metrics = f"{services.url}/metrics"
    before = scrape(metrics).value("baobab_api_requests_total", **users)
    auth = {"Authorization": f"Bearer {client.token}", "Connection": "close"}  # a new connection each: any process
    calls = 12
    for _ in range(calls):
        assert requests.get(f"{services.url}/api/v1/users", headers=auth, timeout=10).status_code == 200
    totals = {scrape(metrics).value("baobab_api_requests_total", **users) for _ in range(6)}
    assert totals == {before + calls}
