"""A hostile template on a real Celery worker: what docs/security.md says of cluster workers, checked.

A pool process runs no template code: it hands the trial to a worker process of its own, a
template process (its own PID namespace, see :mod:`baobab._contained`) confined to its user's
folder (:mod:`baobab._sandbox`) that reaches artifacts only through the API. The hostile
template (worker_tests/templates/hostile.py), in one trial:

- double-forks a ``setsid()`` daemon that holds an ``flock`` on a file while it lives: it ends
  with the trial;
- reads the shared artifact store (every user's datasets and templates, another user's among
  them): refused;
- reads ``/proc/<pid>/environ`` and ``cmdline`` of the API, the advisor, the worker and its pool
  processes, and signals them: none of them exists for it;
- writes into the artifact store and the worker's home, outside its own folder: refused, and
  nothing lands there.

Landlock and PID namespaces are required parts here: without them a CI run fails, saying which.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from conftest import StartCluster

from baobab._contained import TemplateProcess, children_of
from baobab._sandbox import landlock_available
from baobab.sdk import Client
from baobab.testing import missing_part, wait_until

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


def _pid_namespaces() -> bool:
    """Whether a template process gets a PID namespace here (its pid there is 2)."""
    process = TemplateProcess([sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE)
    out, _ = process.communicate(timeout=60)
    return out.strip() == b"2"


def test_a_hostile_template_on_a_celery_worker_reaches_nothing_and_leaves_nothing(
    start_cluster: StartCluster, breast_cancer: Path, signal_dir: Path
) -> None:
    if not landlock_available():
        missing_part("this kernel has no Landlock: a cluster worker's disk is not confined (docs/security.md)")
    if not _pid_namespaces():
        missing_part("no PID namespace can be made here: templates see the worker's processes (docs/security.md)")
    cluster = start_cluster(workers=1, slots=1)
    client, services = cluster.client, cluster.services
    lock = signal_dir / "daemon.lock"
    # Another user's data: an artifact the template must not reach.
    client.create_user("other@example.com", "password-123", role="APP_DEVELOPER")
    other = Client(client.url)
    other.login("other@example.com", "password-123")
    other.create_dataset("theirs", breast_cancer / "test.csv", format="TABULAR", target="target")
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(HOSTILE, task="TABULAR_REGRESSION", class_name="Hostile")

    artifacts = services.home / "shared-artifacts"
    stored = sorted(str(p) for p in artifacts.rglob("*") if p.is_file())
    assert len(stored) >= 3, stored  # both users' datasets and the template
    read = [str(artifacts), *stored]
    worker_home = services.home / "worker-0"
    write = [str(artifacts / "planted.py"), str(worker_home / "planted"), str(worker_home / "workers" / "planted")]
    worker_pid = services.workers[0].process.pid  # type: ignore[union-attr]
    # Once Celery says it is ready its pool is started; a child seen before then may be a passing one (a probe).
    wait_until(lambda: "w0@cluster ready." in services.workers[0].log_text(), what="the worker to be ready")
    pool = sorted(children_of(worker_pid))
    server_pids = [services.api.process.pid, services.advisors[0].process.pid, worker_pid, *pool]  # type: ignore[union-attr]

    job = client.create_train_job(
        "hostile",
        "TABULAR_REGRESSION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 1, "GPU_COUNT": 0},
        train_args={"lock": str(lock), "server_pids": server_pids, "read": read, "write": write},
    )
    job = client.wait_for_train_job("hostile", job["app_version"], timeout=180, progress=False)
    assert job["status"] == "COMPLETED", job
    (trial,) = client.get_trials("hostile", job["app_version"])["trials"]
    assert trial["worker"].startswith("w0@")  # it ran on the Celery worker ...
    assert int(trial["worker"].rsplit(":", 1)[1]) in pool  # ... for one of its pool processes
    logs = [entry["line"] for entry in client.get_trial_logs(trial["id"])]
    hostile = [line for line in logs if line.startswith("hostile ") and line != "hostile daemon started"]
    expected = [f"hostile {what} {pid}" for pid in server_pids for what in ("environ", "cmdline", "kill")]
    expected += [f"hostile read {path}" for path in read] + [f"hostile write {path}" for path in write]
    assert [line.split(":")[0] for line in hostile] == expected  # every attempt was made
    # (1) the server's processes do not exist for it: no file in /proc, no process to signal
    processes = [line for line in hostile if not line.startswith(("hostile read", "hostile write"))]
    assert all(line.endswith(("FileNotFoundError", "ProcessLookupError")) for line in processes), processes
    # (2) no artifact of any user, not even its own trial's, is read but through the API
    reads = [line for line in hostile if line.startswith("hostile read")]
    assert all(line.endswith(": PermissionError") for line in reads), reads
    # (3) nothing is written where the worker or the platform would find it
    writes = [line for line in hostile if line.startswith("hostile write")]
    assert all(line.endswith(": PermissionError") for line in writes), writes
    assert not [path for path in write if Path(path).exists()]
    # (4) the daemon it left ends with the trial
    assert "hostile daemon started" in logs
    assert lock.read_text().isdigit(), "the daemon wrote no pid"
    wait_until(lambda: not _held(lock), what="the trial's daemon to end with its trial")
