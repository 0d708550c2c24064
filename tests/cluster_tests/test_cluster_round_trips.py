"""A Celery worker's requests a trial on the real services: by default an outcome, then the next claim; with
``BAOBAB_FINISH_WAIT_S`` above 0, one request, the outcome going with the claim of the next trial.

What shows it is the API's own request counts (its ``/metrics``) and the trial rows: with the
wait, the outcome of each trial is stored in the transaction that claims the next one on
the same pool process, so its ``finished_at`` is the next one's ``started_at``. Every
interim row arrives, whichever request carried it, and the last trial's outcome goes alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_jobs import account, start_slow_job
from conftest import StartCluster

from baobab.testing import scrape

TRIALS = 6


def _posts(url: str, action: str) -> float:
    labels = {"route": f"/api/v1/worker/trials/<int:trial_id>/{action}", "method": "POST", "status": "200"}
    return scrape(f"{url}/metrics").value("baobab_api_requests_total", **labels) or 0.0


@pytest.mark.parametrize("finish_wait", ["0", "0.05"])
def test_an_outcome_goes_before_the_next_claim_or_with_it(
    start_cluster: StartCluster, breast_cancer: Path, finish_wait: str
) -> None:
    cluster = start_cluster(workers=1, slots=1, settings={"BAOBAB_FINISH_WAIT_S": finish_wait})
    job = start_slow_job(cluster, breast_cancer, app="one-request", trials=TRIALS, sleep_s=0.4)
    done = cluster.client.wait_for_train_job("one-request", job["app_version"], timeout=120, progress=False)
    assert done["status"] == "COMPLETED"
    books = account(cluster, "one-request", job["app_version"], TRIALS)
    assert books.lost == 0 and books.finished == TRIALS and books.retried == 0, books

    url = cluster.services.url
    rows = cluster.rows(
        "SELECT t.id, t.started_at, t.finished_at FROM trials t JOIN sub_jobs s ON s.id = t.sub_job_id "
        "WHERE s.train_job_id = :job ORDER BY t.started_at",
        job=job["id"],
    )
    pairs = list(zip(rows, rows[1:], strict=False))
    if finish_wait == "0":  # a claim and a finish a trial: each outcome stored before the next claim
        assert (_posts(url, "claim"), _posts(url, "finish")) == (TRIALS, TRIALS)
        assert all(before.finished_at < after.started_at for before, after in pairs)
    else:  # one claim alone (the pool process's first trial), then one finish a trial, the next claim riding on it
        assert (_posts(url, "claim"), _posts(url, "finish")) == (1, TRIALS)
        assert all(before.finished_at == after.started_at for before, after in pairs)
    # SlowScorer reports a metric and prints a line in each trial: all stored.
    for row in rows:
        assert len(cluster.rows("SELECT id FROM interim_metrics WHERE trial_id = :id", id=row.id)) == 1
        lines = [r.line for r in cluster.rows("SELECT line FROM trial_logs WHERE trial_id = :id", id=row.id)]
        assert "slept 0.4 s" in lines, (row.id, lines)
