"""Kill ``baobab up`` mid-job, start it again: the job finishes with every trial accounted for."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baobab.testing import wait_until

TEMPLATES = Path(__file__).parent / "templates"
TRIALS = 8
WORKERS = 2
#: TinyTorch: a small TorchModel whose ``score()`` holds while ``<signal_dir>/hold`` exists.
TINY_TORCH = Path(__file__).parents[1] / "worker_tests" / "templates" / "tiny_torch.py"
FUSED_TRIALS = 6


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


def test_a_fused_group_killed_with_the_platform_has_each_member_requeued_once(
    start_platform: Callable[[], Any], breast_cancer: Path, signal_dir: Path
) -> None:
    """``baobab up`` dies while a fused group holds mid-step: after the restart each of its members runs once
    more, alone, and every other trial runs once."""
    signals = signal_dir
    hold = signals / "hold"
    hold.touch()  # the groups hold in their first training step until the kill
    first = start_platform()
    client = first.client
    data = client.create_dataset("bc", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(TINY_TORCH, task="TABULAR_CLASSIFICATION", class_name="TinyTorch")
    job = client.create_train_job(
        "fused-restart",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=data["id"],
        val_dataset_id=data["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": FUSED_TRIALS, "GPU_COUNT": 0},
        train_args={"target": "target", "signal_dir": str(signals)},
        options={"warm_start": False, "fusion": {"max_group": 3}},
    )

    def a_group_trains() -> list[dict[str, Any]] | None:
        running = client.get_trials("fused-restart", status="RUNNING")["trials"]
        sizes = Counter((t["fused_group"] or {}).get("id") for t in running if t["fused_group"])
        groups = [group for group, members in sizes.items() if members == 3]
        return running if groups and list(signals.glob("training-*")) else None

    running = wait_until(a_group_trains, timeout=120, what="a fused group of 3 to train")
    first.kill()
    hold.unlink()

    second = start_platform()
    job = second.client.wait_for_train_job("fused-restart", job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    trials = second.client.get_trials("fused-restart", per_page=500)["trials"]
    assert sorted(t["number"] for t in trials) == list(range(FUSED_TRIALS))  # none lost, none proposed twice
    assert all(t["status"] == "COMPLETED" for t in trials), trials
    killed = {t["id"] for t in running}
    for trial in trials:
        if trial["id"] in killed:  # the dead group's claim, then its own, alone
            assert (trial["attempts"], trial["fused_group"]) == (2, None), trial
        else:
            assert trial["attempts"] == 1, trial
