"""Policies and early stopping through ``baobab up``: real worker processes, real templates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"
TRIALS = 5


def test_asha_stops_weak_trials_and_share_params_hands_on_parameters(
    start_platform: Callable[[], Any], breast_cancer: Path, signal_dir: Path
) -> None:
    client = start_platform().client
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(TEMPLATES / "sharer.py", task="TABULAR_CLASSIFICATION", class_name="Sharer")
    arrivals = signal_dir  # the trials' worker processes count their arrivals there
    job = client.create_train_job(
        "policies",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
        train_args={"arrivals_dir": str(arrivals)},
        options={"early_stopping": {"rule": "asha", "eta": 3}, "policies": {"SHARE_PARAMS": True}},
    )
    job = client.wait_for_train_job("policies", job["app_version"], timeout=120, progress=False)
    assert job["status"] == "COMPLETED", job
    trials = sorted(client.get_trials("policies", job["app_version"])["trials"], key=lambda t: t["id"])
    logs = {t["id"]: [line["line"] for line in client.get_trial_logs(t["id"])] for t in trials}

    # ASHA: the first trial to arrive reports 1.0 and completes all 20 steps; the trials that
    # reach the first rung after it with 0.0 are stopped there, through the trial context.
    stopped = [t for t in trials if t["status"] == "STOPPED"]
    assert len(stopped) >= TRIALS - 2, [(t["id"], t["status"]) for t in trials]
    for trial in stopped:
        assert any("early stopping: asha" in line for line in logs[trial["id"]]), logs[trial["id"]]
        assert len(client.get_trial_metrics(trial["id"])) < 20
    assert max(t["score"] for t in trials) == 1.0

    # SHARE_PARAMS: every trial after the first two (which start together) got the parameters
    # of a trial that finished before it started; its log names that trial's x.
    xs = {round(t["knobs"]["x"], 9) for t in trials}
    later = trials[2:]
    for trial in later:
        received = next(line for line in logs[trial["id"]] if line.startswith("received x="))
        value = float(received.removeprefix("received x="))
        assert round(value, 9) in xs - {round(trial["knobs"]["x"], 9)}, (received, trial["knobs"])
    assert all(t["policies"] == {"SHARE_PARAMS": True} for t in trials)
