"""Fused trials on a cluster: a group is one Celery task run by one pool process (in its worker process);
killed mid-step, its members are requeued by the job driver, each alone, and every trial is accounted for once."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

from cluster_jobs import account, start_fused_job
from conftest import StartCluster

from baobab.testing import wait_until

TRIALS = 6


def test_a_fused_group_runs_in_one_pool_process_and_is_requeued_alone_when_it_dies(
    start_cluster: StartCluster, breast_cancer: Path, signal_dir: Path
) -> None:
    cluster = start_cluster(workers=1, slots=1)
    signals = signal_dir
    hold = signals / "hold"
    hold.touch()
    job = start_fused_job(cluster, breast_cancer, app="fused", trials=TRIALS, signal_dir=signals, max_group=3)
    (training,) = wait_until(lambda: list(signals.glob("training-*")), timeout=120, what="the first group to train")
    running = cluster.client.get_trials("fused", status="RUNNING")["trials"]
    assert len(running) == 3 and len({t["worker"] for t in running}) == 1  # one group, one pool process
    assert {t["fused_group"]["size"] for t in running} == {3}
    pid = int(training.name.removeprefix("training-"))  # the worker process's launcher: killed, its tree dies
    pool_process = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert running[0]["worker"].endswith(f":{pool_process}")  # the pool process that started it
    os.kill(pid, signal.SIGKILL)
    hold.unlink()

    done = cluster.client.wait_for_train_job("fused", job["app_version"], timeout=180, progress=False)
    assert done["status"] == "COMPLETED", done
    books = account(cluster, "fused", job["app_version"], TRIALS)
    assert books.lost == 0 and books.proposed == TRIALS and books.finished == TRIALS, books
    killed = {t["id"] for t in running}
    for trial in books.trials:
        if trial["id"] in killed:  # requeued by the job driver, and run alone
            assert (trial["attempts"], trial["fused_group"]) == (2, None), trial
        else:  # the other group ran as one
            assert trial["attempts"] == 1 and trial["fused_group"]["size"] == 3, trial
    others = [t for t in books.trials if t["id"] not in killed]
    assert Counter(t["worker"] for t in others).most_common(1)[0][1] == 3
