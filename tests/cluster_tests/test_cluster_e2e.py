"""Train → serve → predict on a cluster: API under gunicorn, advisor, two worker machines, a predictor host;
and a job on RabbitMQ as the broker instead of Redis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from cluster_jobs import account, running_trial, start_breast_cancer_job, start_slow_job
from conftest import StartCluster

TRIALS = 6


def test_train_serve_predict_on_celery_workers_that_hold_no_database_credentials(
    start_cluster: StartCluster, breast_cancer: Path
) -> None:
    cluster = start_cluster(workers=2, slots=1)
    services, client = cluster.services, cluster.client
    assert all("BAOBAB_DATABASE_URL" not in w.env and "BAOBAB_ADMIN_PASSWORD" not in w.env for w in services.workers)

    job = start_breast_cancer_job(cluster, breast_cancer, trials=TRIALS)
    job = client.wait_for_train_job("bc", job["app_version"], timeout=180, progress=False)
    assert job["status"] == "COMPLETED", job
    assert job["trial_counts"]["COMPLETED"] == TRIALS and job["best_score"] > 0.9

    trials = client.get_trials("bc", job["app_version"])["trials"]
    assert sorted(t["number"] for t in trials) == list(range(TRIALS))
    machines = {t["worker"].split("@")[0] for t in trials}
    assert machines == {"w0", "w1"}, f"the job's trials should spread over both worker machines: {machines}"

    services.add_predictor_host()
    best = client.get_best_trials("bc", job["app_version"], k=2)
    inference = client.create_inference_job("bc", job["app_version"], k=2)
    served = client.wait_for_inference_job(inference["id"], timeout=120)
    assert served["status"] == "RUNNING", served
    assert sorted(m["trial_id"] for m in served["members"]) == sorted(t["id"] for t in best)

    test = pd.read_csv(breast_cancer / "test.csv")
    queries = test.drop(columns="target").to_numpy().tolist()
    answer = client.predict(queries, predictor_url=served["predictor_url"], api_key=inference["api_key"])
    assert sorted(answer["members"]["answered"]) == sorted(t["id"] for t in best)
    accuracy = float(np.mean(np.asarray(answer["predictions"]) == test["target"].to_numpy()))
    assert accuracy > 0.9


def test_rabbitmq_carries_the_trials_and_events_as_well(
    start_cluster: StartCluster, breast_cancer: Path, rabbitmq_url: str
) -> None:
    """The same platform on RabbitMQ; a worker machine killed mid-trial has its trial redelivered to the other."""
    cluster = start_cluster(workers=2, slots=1, broker_url=rabbitmq_url)
    job = start_slow_job(cluster, breast_cancer, app="rabbit", trials=6, sleep_s=1.5)
    victim = running_trial(cluster, "rabbit", on="w0@")
    cluster.services.workers[0].kill()
    done = cluster.client.wait_for_train_job("rabbit", job["app_version"], timeout=120, progress=False)
    assert done["status"] == "COMPLETED", done
    books = account(cluster, "rabbit", job["app_version"], 6)
    assert books.lost == 0 and books.finished == 6, books
    redone = next(t for t in books.trials if t["id"] == victim["id"])
    assert redone["worker"].startswith("w1@") and redone["attempts"] == 2
