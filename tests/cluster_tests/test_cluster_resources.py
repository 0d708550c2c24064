"""Resources on the cluster: each Celery worker reports what it has, a job asking for more is refused saying
what there is, and a launch gets the threads and memory its job asks for (real API, advisor, workers, Redis)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import StartCluster

from baobab.sdk import ApiError
from baobab.testing import wait_until
from baobab.worker._memory import machine_memory_mb

PROBE = Path(__file__).parent / "templates" / "launch_probe.py"


def test_workers_report_what_they_have_and_launches_get_what_their_job_asks_for(
    start_cluster: StartCluster, breast_cancer: Path
) -> None:
    cluster = start_cluster(workers=2, slots=1)
    names = {"w0@cluster", "w1@cluster"}
    wait_until(
        lambda: {row.name for row in cluster.rows("SELECT name FROM workers")} == names,
        timeout=60,
        what="both workers' inventories in the store",
    )
    cores, memory = len(os.sched_getaffinity(0)), machine_memory_mb()
    rows = cluster.rows("SELECT name, slots, cores, memory_mb, devices FROM workers ORDER BY name")
    assert [tuple(row) for row in rows] == [(name, 1, cores, memory, {"gpus": []}) for name in sorted(names)]

    client = cluster.client
    dataset = client.create_dataset("data", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(PROBE, task="TABULAR_CLASSIFICATION", class_name="LaunchProbe")

    def create(budget: dict[str, int], resources: dict[str, int]) -> dict[str, object]:
        return client.create_train_job(
            "probe",
            "TABULAR_CLASSIFICATION",
            train_dataset_id=dataset["id"],
            val_dataset_id=dataset["id"],
            model_ids=[model["id"]],
            budget={"MODEL_TRIAL_COUNT": 2, **budget},
            options={"resources": resources},
        )

    for budget, resources, field in (
        ({"GPU_COUNT": 1}, {}, "budget.GPU_COUNT"),
        ({}, {"memory_mb": memory + 1}, "options.resources.memory_mb"),
        ({}, {"threads": cores + 1}, "options.resources.threads"),
    ):
        with pytest.raises(ApiError) as refused:
            create(budget, resources)
        assert (refused.value.status, refused.value.field) == (400, field)
        assert f"w0@cluster: {cores} cores, {memory} MiB, no GPUs, 1 slot" in refused.value.message

    # One thread, where the slot's share is every core (one slot a worker): the launch's, not the default.
    job = create({"GPU_COUNT": 0}, {"threads": 1, "memory_mb": 1536})
    done = client.wait_for_train_job("probe", job["app_version"], timeout=180, progress=False)
    assert done["status"] == "COMPLETED", done
    trials = client.get_trials("probe")["trials"]
    assert [t["status"] for t in trials] == ["COMPLETED"] * 2
    for trial in trials:
        lines = [log["line"] for log in client.get_trial_logs(trial["id"]) if log["line"].startswith("launch ")]
        assert lines == ["launch threads=1 blas=1 memory_mb=1536/1536"], lines
