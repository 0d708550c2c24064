"""A daemon that a template leaves behind on a Celery worker ends with its trial.

The hostile template (worker_tests/templates/hostile.py) double-forks a ``setsid()`` daemon
that holds an ``flock`` on a file while it lives. A Celery pool process runs one trial after
another and outlives each: it is a child subreaper, so the daemon becomes its child, and it
ends what the trial left running once the trial is over (see :mod:`baobab._contained`).
"""

from __future__ import annotations

import fcntl
from pathlib import Path

from conftest import StartCluster

from baobab.testing import wait_until

HOSTILE = Path(__file__).parents[1] / "worker_tests" / "templates" / "hostile.py"


def _held(lock: Path) -> bool:
    """Whether a process holds the ``flock`` of ``lock``: the template's daemon is alive."""
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def test_a_daemon_a_trial_leaves_on_a_celery_worker_ends_with_the_trial(
    start_cluster: StartCluster, breast_cancer: Path, tmp_path: Path
) -> None:
    cluster = start_cluster(workers=1, slots=1)
    client = cluster.client
    lock = tmp_path / "daemon.lock"
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(HOSTILE, task="TABULAR_REGRESSION", class_name="Hostile")
    job = client.create_train_job(
        "hostile",
        "TABULAR_REGRESSION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
        train_args={"lock": str(lock)},
    )
    job = client.wait_for_train_job("hostile", job["app_version"], timeout=180, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("hostile", job["app_version"])["trials"]
    assert trial["worker"].startswith("w0@")  # it ran on the Celery worker
    assert "hostile daemon started" in [entry["line"] for entry in client.get_trial_logs(trial["id"])]
    assert lock.read_text().isdigit(), "the daemon wrote no pid"
    wait_until(lambda: not _held(lock), what="the trial's daemon to end with its trial")
