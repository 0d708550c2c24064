"""An ENAS job from start to final full-size training on ``baobab up``, on a tiny Fashion-MNIST subset."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from baobab.advisor import PHASE_POLICIES, EnasPhase
from baobab.store import build_fashion_mnist, params_from_bytes

pytest.importorskip("torch")

EXAMPLES = Path(__file__).parents[2] / "examples" / "models"
SPACES = Path(__file__).parents[2] / "examples" / "spaces"
TEMPLATES = Path(__file__).parent / "templates"
TRIALS = 10  # one shared training, four evaluations, three final evaluations, the final training, and one more


@pytest.fixture(scope="module")
def fashion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fashion")
    build_fashion_mnist(folder, limit=600, seed=0)
    return folder


def test_an_enas_job_searches_on_shared_weights_and_ends_with_one_full_size_training(
    start_platform: Callable[[], Any], fashion: Path
) -> None:
    client = start_platform().client
    train = client.create_dataset("fm train", fashion / "train.zip", format="IMAGE_FILES")
    val = client.create_dataset("fm val", fashion / "val.zip", format="IMAGE_FILES")
    model = client.create_model(EXAMPLES / "enas_cnn.py", task="IMAGE_CLASSIFICATION", class_name="EnasCnn")
    job = client.create_train_job(
        "enas",
        "IMAGE_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
        strategy="enas",
    )
    job = client.wait_for_train_job("enas", job["app_version"], timeout=300, progress=False)
    assert job["status"] == "COMPLETED", job

    trials = sorted(client.get_trials("enas", job["app_version"])["trials"], key=lambda t: t["number"])
    assert all(t["status"] == "COMPLETED" for t in trials), [(t["number"], t["status"], t["error"]) for t in trials]
    phases = {frozenset(p.value for p in on): phase for phase, on in PHASE_POLICIES.items()}
    ran = [phases[frozenset(p for p, on in t["policies"].items() if on)] for t in trials]
    # Shared training first, then evaluations on the shared weights (downscaled, part of the validation
    # set), then the top architectures on the whole validation set, and last one training at full size.
    assert ran[0] is EnasPhase.TRAIN_SHARED and EnasPhase.EVALUATE in ran
    assert ran[-4:] == [EnasPhase.FINAL_EVALUATE] * 3 + [EnasPhase.FINAL_TRAIN]
    final = trials[-1]
    # Only that one may be served: best trials never offer a downscaled or quick-evaluated one.
    best = client.get_best_trials("enas", job["app_version"], k=3)
    assert [t["id"] for t in best] == [final["id"]]
    assert final["score"] > 0.3  # ten classes: well above chance after a full training on 540 images
    logs = "\n".join(line["line"] for t in trials[1:-1] for line in client.get_trial_logs(t["id"]))
    assert "starting from shared parameters" in logs
    # The job's detail pairs each final evaluation's shared-weight score with the stand-alone training of the
    # same architecture, where one ran: the final training's.
    (sub_job,) = client.get_train_job("enas", job["app_version"])["sub_jobs"]
    ranking = sub_job["final_ranking"]
    evaluated = [t for t in trials if ran[trials.index(t)] is EnasPhase.FINAL_EVALUATE]
    assert sorted(e["trial_id"] for e in ranking) == [t["id"] for t in evaluated]
    assert [e["shared_score"] for e in ranking] == sorted((t["score"] for t in evaluated), reverse=True)
    (paired,) = [e for e in ranking if e["standalone_trial_id"] is not None]
    assert (paired["standalone_trial_id"], paired["standalone_score"]) == (final["id"], final["score"])
    assert paired["knobs"] == {"arch": final["knobs"]["arch"]}


def test_shared_trainings_that_run_at_once_both_add_to_the_shared_weights(
    start_platform: Callable[[], Any], breast_cancer: Path
) -> None:
    """Two slots: the second cycle's shared training starts while the first cycle's still runs (evaluations are
    instant, trainings take 2 s), from the same weights. Both updates reach the weights the final phase scores."""
    client = start_platform().client
    train = client.create_dataset("bc", breast_cancer / "train.csv", format="TABULAR", target="target")
    model = client.create_model(
        TEMPLATES / "shared_counter.py", task="TABULAR_CLASSIFICATION", class_name="SharedCounter"
    )
    job = client.create_train_job(
        "adding",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=train["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 15, "GPU_COUNT": 0},
        strategy="enas",
    )
    job = client.wait_for_train_job("adding", job["app_version"], timeout=120, progress=False)
    assert job["status"] == "COMPLETED", job
    trials = sorted(client.get_trials("adding", job["app_version"])["trials"], key=lambda t: t["number"])
    assert all(t["status"] == "COMPLETED" for t in trials), [(t["number"], t["status"], t["error"]) for t in trials]
    phases = {t["id"]: client.get_trial(t["id"])["phase"] for t in trials}
    starts = {t["id"]: _shared_start(client, t["id"]) for t in trials}
    first, second, third = [t for t in trials if phases[t["id"]] == "train_shared"]
    assert starts[first["id"]] is None and starts[second["id"]] == starts[third["id"]] is not None
    assert third["started_at"] < second["finished_at"]  # they ran at once, from the same weights
    # Each final evaluation scores the count of shared trainings in the weights it got: all three,
    # not the two that handing on the last one to finish would have kept.
    finals = [t for t in trials if phases[t["id"]] == "final_evaluate"]
    assert [t["score"] for t in finals] == [3.0, 3.0, 3.0]
    assert all(_merged(client, t["id"]) for t in finals), starts  # the lineage names the merge the driver recorded


def test_an_enas_job_searches_a_model_space_on_its_super_network(
    start_platform: Callable[[], Any], fashion: Path, tmp_path: Path
) -> None:
    """ENAS over the macro space written as base plus mutators (EnasMacro): the controller chooses the space's
    decisions, the shared weights are the super-network SpaceModel hands on, and two shared trainings per cycle
    on two slots that run at once add up. The job ends with one training from scratch at full size."""
    client = start_platform().client
    train = client.create_dataset("fm train", fashion / "train.zip", format="IMAGE_FILES")
    val = client.create_dataset("fm val", fashion / "val.zip", format="IMAGE_FILES")
    model = client.create_model(SPACES / "enas_macro.py", task="IMAGE_CLASSIFICATION", class_name="EnasMacro")
    job = client.create_train_job(
        "macro",
        "IMAGE_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget={"MODEL_TRIAL_COUNT": 14, "GPU_COUNT": 0},
        strategy="enas",
        options={"enas": {"train_trials": 2, "evaluate_trials": 2, "top_k": 2}},
    )
    job = client.wait_for_train_job("macro", job["app_version"], timeout=300, progress=False)
    assert job["status"] == "COMPLETED", job
    trials = sorted(client.get_trials("macro", job["app_version"])["trials"], key=lambda t: t["number"])
    assert all(t["status"] == "COMPLETED" for t in trials), [(t["number"], t["status"], t["error"]) for t in trials]
    phases = {t["id"]: client.get_trial(t["id"])["phase"] for t in trials}
    decisions = {name for name in trials[0]["knobs"] if re.fullmatch(r"op\d|skip\d_\d", name)}
    assert len(decisions) == 21  # six operations, fifteen skips: the controller chose each
    # The super-network grows and is carried: the last shared weights hold every candidate the first training
    # trained (trained on since), and more; the final evaluations start from them.
    shared = [t for t in trials if phases[t["id"]] == "train_shared"]
    finals = [t for t in trials if phases[t["id"]] == "final_evaluate"]
    first, last = (_supernet(client, t["id"], tmp_path) for t in (shared[0], shared[-1]))
    assert set(first) < set(last)
    assert any(not np.array_equal(first[key], last[key]) for key in first if first[key].dtype.kind == "f")
    logs = {t["id"]: "\n".join(line["line"] for line in client.get_trial_logs(t["id"])) for t in trials}
    assert all("the super-network keeps" in logs[t["id"]] for t in trials[1:-1]), logs
    starts = {t["id"]: _shared_start(client, t["id"]) for t in trials}
    assert all(starts[t["id"]] is not None for t in finals)
    # Shared trainings that ran at once from the same weights added up: later trials start from one's update added
    # onto the other's. On two slots they usually overlap, but not always (one may end before the next starts).
    overlapped = [
        (a["number"], b["number"])
        for a, b in itertools.combinations(shared, 2)
        if starts[a["id"]] == starts[b["id"]]
        and b["started_at"] < a["finished_at"]
        and a["started_at"] < b["finished_at"]
    ]
    merged = [t["id"] for t in trials if starts[t["id"]] is not None and _merged(client, t["id"])]
    assert bool(merged) or not overlapped, (overlapped, starts)
    final = trials[-1]
    assert phases[final["id"]] == "final_train" and starts[final["id"]] is None
    assert "super-network" not in logs[final["id"]] and final["score"] > 0.3
    (sub_job,) = client.get_train_job("macro", job["app_version"])["sub_jobs"]
    (paired,) = [e for e in sub_job["final_ranking"] if e["standalone_trial_id"] is not None]
    assert paired["knobs"] == {name: final["knobs"][name] for name in decisions}
    assert client.get_trial_architecture(final["id"])["choices"] == paired["knobs"]


def _supernet(client: Any, trial_id: int, folder: Path) -> dict[str, Any]:
    params = params_from_bytes(client.download_trial_params(trial_id, folder).read_bytes())
    return {key: value for key, value in params.items() if key.startswith("supernet.")}


def _merged(client: Any, trial_id: int) -> bool:
    """Whether the trial started from shared weights that added two trainings up, as its lineage says."""
    chain = client.get_trial(trial_id)["lineage"]["chain"]
    return bool(chain) and chain[0]["source"] == "merged"


def _shared_start(client: Any, trial_id: int) -> str | None:
    """The key of the shared parameters the trial's log says it started from, None when it names none."""
    prefix = "starting from shared parameters "
    for line in client.get_trial_logs(trial_id):
        if line["line"].startswith(prefix):
            return line["line"].removeprefix(prefix).split(" ")[0]
    return None
