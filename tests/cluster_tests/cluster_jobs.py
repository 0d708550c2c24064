"""Jobs for the cluster tests, and the accounting every fault test ends with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, SLOW_SCORER, TINY_TORCH, Cluster

from baobab.testing import wait_until


def start_slow_job(cluster: Cluster, data: Path, *, app: str, trials: int, sleep_s: float) -> dict[str, Any]:
    """A job of ``trials`` SlowScorer trials of ``sleep_s`` seconds each, two at a time."""
    client = cluster.client
    dataset = client.create_dataset(f"{app} data", data / "train.csv", format="TABULAR")
    model = client.create_model(SLOW_SCORER, task="TABULAR_REGRESSION", class_name="SlowScorer")
    return client.create_train_job(
        app,
        "TABULAR_REGRESSION",
        train_dataset_id=dataset["id"],
        val_dataset_id=dataset["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
        train_args={"sleep_s": sleep_s},
    )


def start_fused_job(
    cluster: Cluster, data: Path, *, app: str, trials: int, signal_dir: Path, max_group: int
) -> dict[str, Any]:
    """A job of ``trials`` TinyTorch trials fused in groups of up to ``max_group``, held by ``signal_dir``."""
    client = cluster.client
    dataset = client.create_dataset(f"{app} data", data / "train.csv", format="TABULAR", target="target")
    model = client.create_model(TINY_TORCH, task="TABULAR_CLASSIFICATION", class_name="TinyTorch")
    return client.create_train_job(
        app,
        "TABULAR_CLASSIFICATION",
        train_dataset_id=dataset["id"],
        val_dataset_id=dataset["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
        train_args={"signal_dir": str(signal_dir)},
        target="target",
        options={"warm_start": False, "fusion": {"max_group": max_group}},
    )


def start_breast_cancer_job(cluster: Cluster, data: Path, *, trials: int) -> dict[str, Any]:
    """App ``bc``: the scikit-learn example template on breast cancer (train/val/test CSVs in ``data``)."""
    client = cluster.client
    train = client.create_dataset("bc train", data / "train.csv", format="TABULAR", target="target")
    val = client.create_dataset("bc val", data / "val.csv", format="TABULAR", target="target")
    model = client.create_model(
        EXAMPLES / "sklearn_tabular.py", task="TABULAR_CLASSIFICATION", class_name="SkTabularClassifier"
    )
    return client.create_train_job(
        "bc",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
    )


def running_trial(cluster: Cluster, app: str, *, on: str | None = None, timeout: float = 60) -> dict[str, Any]:
    """A trial of ``app`` RUNNING (on a worker whose name starts with ``on``), once there is one."""

    def find() -> dict[str, Any] | None:
        for trial in cluster.client.get_trials(app, status="RUNNING")["trials"]:
            if on is None or (trial["worker"] or "").startswith(on):
                return trial
        return None

    return wait_until(find, timeout=timeout, what=f"a running trial of {app}" + (f" on {on}" if on else ""))


@dataclass(frozen=True)
class Accounting:
    """What became of a job's trials: every number proposed once, each finished once."""

    proposed: int
    finished: int
    retried: int  # extra attempts: deliveries after the first
    lost: int  # trial numbers missing, or rows not in a final state
    trials: list[dict[str, Any]]


def account(cluster: Cluster, app: str, version: int, expected: int) -> Accounting:
    trials = cluster.client.get_trials(app, version, per_page=500)["trials"]
    numbers = sorted(t["number"] for t in trials)
    finished = [t for t in trials if t["status"] == "COMPLETED"]
    lost = len(set(range(expected)) - set(numbers)) + sum(t["status"] not in ("COMPLETED", "ERRORED") for t in trials)
    assert numbers == sorted(set(numbers)), f"a trial number was proposed twice: {numbers}"
    return Accounting(
        proposed=len(trials),
        finished=len(finished),
        retried=sum(max(0, t["attempts"] - 1) for t in trials),
        lost=lost,
        trials=trials,
    )
