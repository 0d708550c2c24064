"""Upload → train → serve → predict through ``baobab up``, the SDK and real HTTP, on both databases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import requests

from baobab.sdk import ApiError
from baobab.testing import scrape, wait_until

EXAMPLES = Path(__file__).parents[2] / "examples" / "models"


TRIALS = 4


def _answers(url: str) -> bool:
    """Whether anything still listens at ``url``: a connection refused says no; a reply cut off
    by the predictor going down says it was still there."""
    try:
        requests.get(f"{url}/health", timeout=1)
    except requests.exceptions.ChunkedEncodingError:
        return True
    except requests.ConnectionError:
        return False
    return True


def test_train_serve_predict_end_to_end(start_platform: Callable[[], Any], breast_cancer: Path) -> None:
    platform = start_platform()
    client = platform.client
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    val = client.create_dataset("bc val", breast_cancer / "val.csv", format="TABULAR", target="target")
    model = client.create_model(
        EXAMPLES / "sklearn_tabular.py", task="TABULAR_CLASSIFICATION", class_name="SkTabularClassifier"
    )
    job = client.create_train_job(
        "bc",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
    )
    job = client.wait_for_train_job("bc", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    assert job["trial_counts"]["COMPLETED"] == TRIALS
    assert job["best_score"] > 0.9

    trials = client.get_trials("bc", job["app_version"])["trials"]
    assert sorted(t["number"] for t in trials) == list(range(TRIALS))
    assert all(t["worker"] and t["has_params"] for t in trials)
    best = client.get_best_trials("bc", job["app_version"], k=2)
    assert [t["score"] for t in best] == sorted((t["score"] for t in trials), reverse=True)[:2]

    # One process: the API's /metrics shows what its driver and its local workers did (a fresh process: exact counts).
    metrics = scrape(f"{client.url}/metrics")
    assert metrics.value("baobab_driver_trials_started_total") == TRIALS
    assert metrics.value("baobab_driver_trials_finished_total", state="COMPLETED") == TRIALS
    assert metrics.total("baobab_driver_proposal_seconds_count") == TRIALS
    assert metrics.value("baobab_driver_slots") == 2 and metrics.value("baobab_driver_slots_busy") == 0
    assert metrics.value("baobab_worker_trials_total", state="COMPLETED") == TRIALS
    assert metrics.value("baobab_worker_phase_seconds_count", phase="train") == TRIALS
    trial_list = {"route": "/api/v1/train_jobs/<app>/<int:app_version>/trials", "method": "GET", "status": "200"}
    assert metrics.value("baobab_api_requests_total", **trial_list) == 1

    inference = client.create_inference_job("bc", job["app_version"], k=2)
    served = client.wait_for_inference_job(inference["id"], timeout=120)
    assert served["status"] == "RUNNING"
    assert sorted(m["trial_id"] for m in served["members"]) == sorted(t["id"] for t in best)

    test = pd.read_csv(breast_cancer / "test.csv")
    queries = test.drop(columns="target").to_numpy().tolist()
    answer = client.predict(queries, predictor_url=served["predictor_url"], api_key=inference["api_key"])
    assert len(answer["predictions"]) == len(queries)
    assert sorted(answer["members"]["answered"]) == sorted(t["id"] for t in best)
    accuracy = float(np.mean(np.asarray(answer["predictions"]) == test["target"].to_numpy()))
    assert accuracy > 0.9

    with pytest.raises(ApiError) as refused:
        client.predict(queries[:1], predictor_url=served["predictor_url"], api_key="not-the-key")
    assert refused.value.status == 401
    # The predictor, a process of its own, counts its requests on its own /metrics.
    predictor = scrape(f"{served['predictor_url']}/metrics")
    assert predictor.value("baobab_predictor_requests_total", version="v1", status="200") == 1
    assert predictor.value("baobab_predictor_requests_total", version="none", status="401") == 1
    assert predictor.value("baobab_predictor_batch_size_sum") == len(queries)

    # Versions: the third-best trial as a canary, promoted, then two rollbacks, with no restart of the predictor.
    third = client.get_best_trials("bc", job["app_version"], k=3)[2]["id"]
    both = [{"name": "v1", "trial_ids": [t["id"] for t in best]}, {"name": "v2", "trial_ids": [third]}]
    assert client.set_versions(inference["id"], both, wait=True, timeout=120)["served_revision"] == 2
    client.promote_version(inference["id"], "v2", wait=True, timeout=120)
    promoted = client.predict(queries, inference_job_id=inference["id"])
    assert (promoted["version"], promoted["members"]["answered"]) == ("v2", [third])
    for revision in (4, 5):  # back to the canary, then to v1 alone
        assert client.rollback_versions(inference["id"], wait=True, timeout=120)["served_revision"] == revision
    again = client.predict(queries, inference_job_id=inference["id"])
    assert (again["version"], again["predictions"]) == ("v1", answer["predictions"])
    assert client.get_inference_job(inference["id"])["predictor_url"] == served["predictor_url"]

    client.stop_inference_job(inference["id"])
    wait_until(lambda: not _answers(served["predictor_url"]), what="the stopped predictor's port to close")
    assert platform.stop() == 0
