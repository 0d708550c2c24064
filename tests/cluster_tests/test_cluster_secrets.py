"""What a hostile template finds of a cluster's secrets on Celery workers and a predictor host: nothing.

The same snooping template as the embedded test (platform_tests/templates/snoop.py) looks in its
environment and in every ``/proc/<pid>/environ`` it can read: here every service runs on this one
machine, so without its PID namespace it would read the API's, the advisor's, the worker's and the
predictor host's. Every service also holds a credential a filesystem package would read for the
artifact URL (``FS_CREDENTIAL``): the worker's pool processes keep it, their worker processes (which
run the template) get none of it. The disk is probed by test_cluster_containment.py.
"""

from __future__ import annotations

import runpy
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import ADMIN_PASSWORD, StartCluster

SNOOP = Path(__file__).parents[1] / "platform_tests" / "templates" / "snoop.py"


def _snoop_findings(probe: dict[str, Any]) -> list[str]:
    """What the snooping template's probe finds from this (unconfined) process."""
    return list(runpy.run_path(str(SNOOP))["findings"](probe))


def test_a_template_finds_no_secret_on_celery_workers_or_in_a_prediction(
    start_cluster: StartCluster, breast_cancer: Path, postgres_url: str
) -> None:
    credential = "fs-credential-" + secrets.token_hex(8)
    cluster = start_cluster(workers=1, slots=1, settings={"FS_CREDENTIAL": credential})
    services, client = cluster.services, cluster.client
    services.add_predictor_host()
    probe = {"secrets": [services.secret_key, ADMIN_PASSWORD, postgres_url, credential], "paths": []}
    # The probe works: a process that keeps the secret in its environment is found out. The holder
    # says it is up before the probe looks: Popen returns once exec has begun, a moment before the
    # kernel has laid out the new program's environment (until then /proc/<pid>/environ reads empty).
    holding = "import sys, time; print('up', flush=True); time.sleep(60)"
    env = {"SOME_KEY": services.secret_key}
    with subprocess.Popen([sys.executable, "-c", holding], env=env, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "up\n"
            assert f"a secret in /proc/{holder.pid}/environ" in _snoop_findings(probe)
        finally:
            holder.kill()

    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(SNOOP, task="TABULAR_REGRESSION", class_name="Snoop")
    job = client.create_train_job(
        "snoop",
        "TABULAR_REGRESSION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
        train_args={"probe": probe},
    )
    job = client.wait_for_train_job("snoop", job["app_version"], timeout=180, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("snoop", job["app_version"])["trials"]
    assert trial["worker"].startswith("w0@")  # it ran on the Celery worker
    logs = [entry["line"] for entry in client.get_trial_logs(trial["id"])]
    assert [line for line in logs if line.startswith("found: ")] == []
    assert "probed 0 paths and 4 secrets" in logs
    assert trial["score"] == 0.0

    served = client.create_inference_job("snoop", job["app_version"], k=1)
    running = client.wait_for_inference_job(served["id"], timeout=120)
    answer = client.predict([[0.0] * 30], predictor_url=running["predictor_url"], api_key=served["api_key"])
    assert answer["predictions"] == [0.0], "the served template found secrets; see the predictor host's log"
