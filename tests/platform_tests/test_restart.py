"""Kill ``baobab up`` mid-job, start it again: the job finishes with every trial accounted for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from baobab.testing import wait_until

TEMPLATES = Path(__file__).parent / "templates"
TRIALS = 8
WORKERS = 2


def test_killed_platform_finishes_the_job_after_a_restart(
    start_platform: Callable[[], Any], breast_cancer: Path
) -> None:
    first = start_platform()
    client = first.client
    data = client.create_dataset("bc", breast_cancer / "train.csv", format="TABULAR")
    model = client.create_model(TEMPLATES / "slow_scorer.py", task="TABULAR_REGRESSION", class_name="SlowScorer")
    job = client.create_train_job(
        "restart",
        "TABULAR_REGRESSION",
        train_dataset_id=data["id"],
        val_dataset_id=data["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
        train_args={"sleep_s": 0.7},
    )
    finished = wait_until(
        lambda: (done := client.get_trials("restart", status="COMPLETED")["trials"]) and len(done) >= 3 and done,
        timeout=120,
        what="three trials to finish before the kill",
        interval=0.1,
    )
    first.kill()

    second = start_platform()
    job = second.client.wait_for_train_job("restart", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    trials = second.client.get_trials("restart", per_page=500)["trials"]
    assert sorted(t["number"] for t in trials) == list(range(TRIALS))  # none lost, none counted twice
    assert all(t["status"] == "COMPLETED" for t in trials)
    by_id = {t["id"]: t for t in trials}
    for earlier in finished:  # finished before the kill: kept exactly as it was
        assert by_id[earlier["id"]] == earlier
    # Only what ran at the kill (at most one trial a worker) ran again.
    assert TRIALS <= sum(t["attempts"] for t in trials) <= TRIALS + WORKERS
