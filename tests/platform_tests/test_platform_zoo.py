"""The model zoo on the platform: every TorchModel trial joins the zoo, and a second job warm-starts from the first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples" / "models"
TRIALS = 2


def _job(client: Any, app: str, data: dict[str, Any], model: dict[str, Any], **options: Any) -> dict[str, Any]:
    job = client.create_train_job(
        app,
        "TABULAR_CLASSIFICATION",
        train_dataset_id=data["train"],
        val_dataset_id=data["val"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
        target="target",
        options=options or None,
        strategy="random",
    )
    job = client.wait_for_train_job(app, job["app_version"], timeout=240, progress=False)
    assert job["status"] == "COMPLETED", job
    return job


def test_a_second_job_warm_starts_from_the_first_jobs_models(
    start_platform: Callable[[], Any], breast_cancer: Path
) -> None:
    client = start_platform().client
    train = client.create_dataset("bc train", breast_cancer / "train.csv", format="TABULAR", target="target")
    val = client.create_dataset("bc val", breast_cancer / "val.csv", format="TABULAR", target="target")
    data = {"train": train["id"], "val": val["id"]}
    model = client.create_model(EXAMPLES / "torch_mlp.py", task="TABULAR_CLASSIFICATION", class_name="TorchMlp")

    first = _job(client, "zoo-first", data, model)
    zoo = client.list_zoo_models(task="TABULAR_CLASSIFICATION")
    first_trials = client.get_trials("zoo-first", first["app_version"])["trials"]
    assert len(zoo) == TRIALS  # every successful TorchModel trial joined the zoo
    # The zoo was empty: a parent can only be a model of this job's trials that had finished (when a
    # slot's worker was slow to start and the two trials ran one after the other).
    own = {m["id"] for m in zoo}
    assert all(t["parent_zoo_model_id"] in own | {None} for t in first_trials)
    assert any(t["parent_zoo_model_id"] is None for t in first_trials)

    # Where the first job's time went, as the SDK reads it (GET .../time_breakdown): every phase its
    # trials went through, summed; a zoo lookup even with nothing to start from; no fusion measured.
    spent = client.get_time_breakdown("zoo-first", first["app_version"])
    phases = ["wait", "fetch", "warm_start", "profile", "build", "train", "evaluate", "store"]
    assert spent["phases"] == phases and spent["trials"] == TRIALS
    assert all(spent["seconds"][phase] > 0 for phase in phases if phase != "profile"), spent
    assert spent["seconds"]["profile"] == 0 and spent["total_s"] == pytest.approx(sum(spent["seconds"].values()))
    (per_template,) = spent["sub_jobs"]
    assert per_template["model_id"] == model["id"] and per_template["seconds"] == spent["seconds"]
    assert per_template["trials"] == TRIALS and per_template["total_s"] == spent["total_s"]
    # The trials' own rows hold the measured part; the job's sum adds each trial's wait for a slot.
    measured = [t["time_breakdown"] for t in first_trials]
    assert all(set(m) == set(phases) - {"wait", "profile"} for m in measured), measured
    assert spent["seconds"]["train"] == pytest.approx(sum(m["train"] for m in measured))

    second = _job(client, "zoo-second", data, model)
    trials = client.get_trials("zoo-second", second["app_version"])["trials"]
    zoo_ids = {m["id"] for m in zoo}
    assert all(t["parent_zoo_model_id"] in zoo_ids for t in trials), trials
    assert all(0 < t["similarity"] <= 1 for t in trials)
    logs = "\n".join(line["line"] for t in trials for line in client.get_trial_logs(t["id"]))
    assert "warm start" in logs.lower(), logs
    # A trial's lineage names its parent: the zoo model and the trial it was trained in.
    trained_in = {m["id"]: m["trial_id"] for m in client.list_zoo_models(task="TABULAR_CLASSIFICATION")}
    for t in trials:
        lineage = client.get_trial(t["id"])["lineage"]
        parent = lineage["chain"][0]
        assert (lineage["from"], parent["via"], parent["source"]) == ("zoo", "zoo", "trial"), lineage
        assert parent["zoo_model_id"] == t["parent_zoo_model_id"], lineage
        assert parent["trial_id"] == trained_in[parent["zoo_model_id"]], lineage
        assert parent["similarity"] == t["similarity"] and parent["epochs"] > 0, lineage
        assert lineage["inherited_epochs"] == sum(a["epochs"] for a in lineage["chain"]) and not lineage["truncated"]

    switched_off = _job(client, "zoo-off", data, model, warm_start=False)
    cold = client.get_trials("zoo-off", switched_off["app_version"])["trials"]
    assert all(t["parent_zoo_model_id"] is None for t in cold)
    assert client.get_time_breakdown("zoo-off")["seconds"]["warm_start"] == 0  # no zoo lookup at all
    # Switching warm starts off is about where training starts: the trained models still join.
    joined = {m["trial_id"] for m in client.list_zoo_models(task="TABULAR_CLASSIFICATION")}
    assert {t["id"] for t in cold} <= joined
