"""What a hostile template finds of ``baobab up``'s secrets: nothing, in a trial or in a prediction.

The template (templates/snoop.py) looks in its environment, reads every ``/proc/<pid>/environ``
it can, and tries the platform's files: the SQLite database, the secret key, the artifacts
(every user's datasets and templates) and the logs. The same probe run in this test's own
process finds them, so a clean report is the sandbox's doing. Another user's data set is
uploaded first, so there are other users' artifacts to find.

The hostile template (worker_tests/templates/hostile.py) leaves a daemon, looks for the server's
process and tries to write outside its own folder: into the artifact store and the platform's home.
"""

from __future__ import annotations

import fcntl
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_PASSWORD
from itsdangerous import URLSafeTimedSerializer

from baobab._sandbox import landlock_available
from baobab.sdk import ApiError, Client
from baobab.testing import missing_part, wait_until

SNOOP = Path(__file__).parent / "templates" / "snoop.py"
HOSTILE = Path(__file__).parents[1] / "worker_tests" / "templates" / "hostile.py"
#: The key earlier versions signed tokens with when none was set (it was published).
OLD_DEFAULT_KEY = "baobab-development-key-do-not-use-in-production"


def _snoop_findings(probe: dict[str, Any]) -> list[str]:
    """What the snooping template's probe finds from this (unconfined) process."""
    return list(runpy.run_path(str(SNOOP))["findings"](probe))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database file is one of the secrets
def test_a_template_finds_no_secret_in_a_trial_or_a_prediction(
    start_platform: Callable[[], Any], breast_cancer: Path, tmp_path: Path, db_url: str
) -> None:
    if not landlock_available():
        missing_part("this kernel has no Landlock: the disk is not confined (the README says what holds)")
    running = start_platform()
    client = running.client
    home = tmp_path / "home"
    secret = (home / "secret_key").read_text().strip()
    # Another user's data: an artifact the snooping template must not reach.
    client.create_user("other@example.com", "password-123", role="APP_DEVELOPER")
    other = Client(client.url)
    other.login("other@example.com", "password-123")
    other.create_dataset("theirs", breast_cancer / "test.csv", format="TABULAR", target="target")
    probe = {
        "secrets": [secret, ADMIN_PASSWORD],
        "paths": [db_url.removeprefix("sqlite:///"), *(str(home / n) for n in ("secret_key", "artifacts", "logs"))],
    }
    here = _snoop_findings(probe)
    assert {f"read {path}" for path in probe["paths"]} <= set(here)  # the probe works where nothing confines it

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
    job = client.wait_for_train_job("snoop", job["app_version"], timeout=120, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("snoop", job["app_version"])["trials"]
    logs = [entry["line"] for entry in client.get_trial_logs(trial["id"])]
    assert [line for line in logs if line.startswith("found: ")] == []
    assert "probed 4 paths and 2 secrets" in logs
    assert trial["score"] == 0.0

    served = client.create_inference_job("snoop", job["app_version"], k=1)
    running_job = client.wait_for_inference_job(served["id"], timeout=120)
    answer = client.predict([[0.0] * 30], predictor_url=running_job["predictor_url"], api_key=served["api_key"])
    assert answer["predictions"] == [0.0], "the served template found secrets; see its inference worker's log"


def test_a_token_signed_with_the_old_default_key_is_refused(start_platform: Callable[[], Any]) -> None:
    client = start_platform().client
    forged = URLSafeTimedSerializer(OLD_DEFAULT_KEY, salt="baobab.admin.token").dumps({"uid": 1})
    intruder = Client(client.url, token=forged)
    with pytest.raises(ApiError) as refused:
        intruder.list_users()
    assert refused.value.status == 401


def test_a_template_can_neither_reach_the_server_process_nor_leave_a_daemon_behind(
    start_platform: Callable[[], Any], breast_cancer: Path, signal_dir: Path
) -> None:
    """The hostile template (worker_tests/templates/hostile.py) under ``baobab up``: see :mod:`baobab._contained`."""
    lock = signal_dir / "daemon.lock"
    running = start_platform()
    server_pid = running.platform._process.pid
    logs = _hostile_trial(running.client, breast_cancer, {"lock": str(lock), "server_pid": server_pid})
    assert "hostile daemon started" in logs and lock.read_text().isdigit()
    snooped = [line for line in logs if line.startswith("hostile ") and line != "hostile daemon started"]
    assert [line.split(":")[0] for line in snooped] == ["hostile environ", "hostile cmdline", "hostile kill"]
    assert not [line for line in snooped if line.endswith(": ok")], snooped
    wait_until(lambda: not _held(lock), what="the trial's daemon to end with its trial")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database's backend changes nothing here
def test_a_template_writes_nothing_outside_its_own_folder(
    start_platform: Callable[[], Any], breast_cancer: Path, tmp_path: Path
) -> None:
    """What the Celery worker's test checks (cluster_tests/test_cluster_containment.py), under ``baobab up``."""
    if not landlock_available():
        missing_part("this kernel has no Landlock: the disk is not confined (docs/security.md says what holds)")
    home = tmp_path / "home"
    # the artifact store (a template planted there is loaded by the next trial that uses it), the home with its
    # secret key, and the folder that holds every user's private folder
    write = [str(home / "artifacts" / "planted.py"), str(home / "planted"), str(home / "workers" / "planted")]
    logs = _hostile_trial(start_platform().client, breast_cancer, {"write": write})
    writes = [line for line in logs if line.startswith("hostile write")]
    assert [line.split(":")[0] for line in writes] == [f"hostile write {path}" for path in write]  # each was tried
    assert all(line.endswith(": PermissionError") for line in writes), writes
    assert not [path for path in write if Path(path).exists()]


def _hostile_trial(client: Client, breast_cancer: Path, train_args: dict[str, Any]) -> list[str]:
    """The log lines of one completed trial of the hostile template run with ``train_args``."""
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(HOSTILE, task="TABULAR_REGRESSION", class_name="Hostile")
    job = client.create_train_job(
        "hostile",
        "TABULAR_REGRESSION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
        train_args=train_args,
    )
    job = client.wait_for_train_job("hostile", job["app_version"], timeout=120, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("hostile", job["app_version"])["trials"]
    return [entry["line"] for entry in client.get_trial_logs(trial["id"])]


def _held(lock: Path) -> bool:
    """Whether a process holds the ``flock`` of ``lock``: the hostile template's daemon is alive."""
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False
