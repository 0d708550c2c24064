"""Fused members: the members of one template and one structure answer stacked, in one worker process.

One inference job of four TorchCnn trials (``examples/models/torch_cnn.py``) trained on
scikit-learn's digits: three of one structure (4 channels, two blocks), which differ in
learning rate, dropout and seed, and an odd one with 8 channels. Two predictors serve it,
fused (the default) and ``--no-fuse``; answers are probabilities, averaged.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import requests
from predictor_world import (
    ITEM_NET,
    SK_IMAGES,
    TORCH_CNN,
    Predictor,
    Trained,
    World,
    children,
    command_line,
    make_world,
    tabular_frame,
    wait_ready,
)

from baobab.model import DatasetFormat, Task
from baobab.predictor._job import load_job
from baobab.store import write_image_files
from baobab.worker import FusedInferenceWorker, InferenceWorkerError

#: Stacked against unstacked forward passes: measured up to 3e-8 (tests/model_tests/test_stacked.py).
ATOL = 1e-6
POLICIES = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}


@dataclass
class Served:
    world: World
    job_id: int
    api_key: str
    fused: Predictor
    fanned: Predictor
    members: list[Trained]  # best first: the three of one structure, then the odd one
    images: list[Trained]  # two SkImageClassifier trials of one structure (not TorchModels)
    queries: list[Any]

    def post(self, predictor: Predictor, queries: list[Any]) -> dict[str, Any]:
        response = requests.post(
            f"{predictor.url}/predict",
            json={"queries": queries},
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def local(self, members: list[Trained], queries: list[Any]) -> np.ndarray:
        return np.mean([m.model.predict(queries) for m in members], axis=0)

    @property
    def ids(self) -> list[int]:
        return [m.trial_id for m in self.members]


def cnn_knobs(**overrides: Any) -> dict[str, Any]:
    knobs = dict(learning_rate=1e-2, channels=4, depth=2, kernel_size=3, dropout=0.0, epochs=2, batch_size=32)
    return {**knobs, **POLICIES, **overrides}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from sklearn.datasets import load_digits

    home = tmp_path_factory.mktemp("fused-members")
    world = make_world(f"sqlite:///{home / 'baobab.db'}", home)
    digits = load_digits()
    images = (digits.images * 15).astype(np.uint8)
    dataset_id, path = world.dataset(
        write_image_files(world.work / "digits.zip", images[:400], digits.target[:400]), DatasetFormat.IMAGE_FILES
    )
    sub_job = world.train_job(Task.IMAGE_CLASSIFICATION, dataset_id, TORCH_CNN, "TorchCnn")
    members = [
        world.trial(sub_job, TORCH_CNN, "TorchCnn", cnn_knobs(**knobs), path, score=score, train_args={"seed": seed})
        for knobs, score, seed in (
            ({"learning_rate": 1e-2}, 0.9, 1),
            ({"learning_rate": 3e-3, "dropout": 0.3}, 0.8, 2),
            ({"learning_rate": 2e-2, "dropout": 0.1}, 0.7, 3),
            ({"channels": 8}, 0.6, 4),
        )
    ]
    job_id, api_key = world.inference_job([m.trial_id for m in members])
    sk_job = world.train_job(Task.IMAGE_CLASSIFICATION, dataset_id, SK_IMAGES, "SkImageClassifier")
    sk_members = [
        world.trial(
            sk_job,
            SK_IMAGES,
            "SkImageClassifier",
            {"components": 16, "neighbors": k, "weights": "uniform"},
            path,
            score=0.5,
        )
        for k in (3, 7)
    ]
    fused, fanned = Predictor(world, job_id), Predictor(world, job_id, "--no-fuse")
    try:
        fused.wait_url()
        fanned.wait_url()
        queries = images[400:424].astype(int).tolist()
        yield Served(world, job_id, api_key, fused, fanned, members, sk_members, queries)
    finally:
        fused.close()
        fanned.close()
        world.engine.dispose()


def test_the_fused_ensemble_answers_as_the_fan_out(served: Served) -> None:
    fused, fanned = (served.post(p, served.queries) for p in (served.fused, served.fanned))
    assert fused["members"] == fanned["members"] == {"answered": served.ids, "left_out": []}
    np.testing.assert_allclose(fused["predictions"], fanned["predictions"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(fused["predictions"], served.local(served.members, served.queries), rtol=0, atol=ATOL)
    # The members disagree, so an answer that left one out would show.
    answers = [m.model.predict(served.queries) for m in served.members]
    assert all(np.abs(np.subtract(answers[0], other)).max() > 1e-3 for other in answers[1:])


def workers(predictor: Predictor) -> dict[str, list[int]]:
    """The predictor's worker processes by the module they run."""
    found: dict[str, list[int]] = {}
    for pid in children(predictor.process.pid):
        found.setdefault(command_line(pid)[-1], []).append(pid)
    return found


def test_one_process_serves_the_members_of_one_structure(served: Served) -> None:
    wait_ready(served.fused.url, 4)
    counts = {module: len(pids) for module, pids in workers(served.fused).items()}
    # The three of one structure in one process, the odd one in another.
    assert counts == {"baobab.worker._fused_inference": 1, "baobab.worker._inference": 1}
    counts = {module: len(pids) for module, pids in workers(served.fanned).items()}
    assert counts == {"baobab.worker._inference": 4}


def test_a_killed_fused_worker_leaves_its_members_out_until_it_is_back(served: Served) -> None:
    wait_ready(served.fused.url, 4)
    (pid,) = workers(served.fused)["baobab.worker._fused_inference"]
    os.kill(pid, signal.SIGKILL)
    body = served.post(served.fused, served.queries)
    odd = served.members[3]
    assert body["members"]["answered"] == [odd.trial_id]
    left_out = body["members"]["left_out"]
    assert [lo["trial_id"] for lo in left_out] == served.ids[:3]
    assert all("the inference process was killed by signal SIGKILL" in lo["reason"] for lo in left_out), left_out
    np.testing.assert_allclose(body["predictions"], served.local([odd], served.queries), rtol=0, atol=ATOL)
    wait_ready(served.fused.url, 4, timeout=60)
    body = served.post(served.fused, served.queries)
    assert body["members"] == {"answered": served.ids, "left_out": []}
    np.testing.assert_allclose(body["predictions"], served.local(served.members, served.queries), rtol=0, atol=ATOL)
    assert workers(served.fused)["baobab.worker._fused_inference"] != [pid]


def test_a_fused_worker_serves_what_stacks_and_names_the_rest(served: Served) -> None:
    specs = [m.worker for m in load_job(served.world.settings, served.job_id).revision.versions[0].members]
    lost = replace(specs[1], trial_id=10**6, params_key="params/gone.safetensors")
    worker = FusedInferenceWorker([*specs, lost], log_path=served.world.work / "fused.log")
    try:
        apart = worker.start(timeout=60)
        assert set(apart) == {served.members[3].trial_id, lost.trial_id}
        assert apart[served.members[3].trial_id].startswith("its parameters differ from the stacked members'")
        assert apart[lost.trial_id].startswith(f"cannot read the parameters of trial {lost.trial_id}")
        answers = worker.predict(served.queries, timeout=60)
        assert list(answers) == served.ids[:3]
        for member, answer in zip(served.members, answers.values(), strict=False):
            np.testing.assert_allclose(answer, member.model.predict(served.queries), rtol=0, atol=ATOL)
        # A query no member can read: each member's own error, and the process serves on.
        answers = worker.predict([[[1, 2], [3]]], timeout=60)
        assert all(isinstance(a, InferenceWorkerError) and not a.fatal for a in answers.values())
        assert all(str(a).startswith("predict() raised ValueError") for a in answers.values()), answers
        assert len(worker.predict(served.queries[:2], timeout=60)) == 3
    finally:
        worker.close()


def test_members_that_are_no_torch_models_are_all_apart(served: Served) -> None:
    job_id, _ = served.world.inference_job([m.trial_id for m in served.images])
    specs = [m.worker for m in load_job(served.world.settings, job_id).revision.versions[0].members]
    worker = FusedInferenceWorker(specs, log_path=served.world.work / "fused-sk.log")
    try:
        apart = worker.start(timeout=60)
        reason = "SkImageClassifier is not a TorchModel; only TorchModel templates answer stacked"
        assert apart == {m.trial_id: reason for m in served.images}
        assert not worker.alive
    finally:
        worker.close()


def test_members_vmap_cannot_batch_answer_one_by_one(served: Served) -> None:
    world = served.world
    dataset_id, cancer = world.tabular("breast_cancer")
    sub_job = world.train_job(Task.TABULAR_CLASSIFICATION, dataset_id, ITEM_NET, "ItemNet")
    members = [
        world.trial(sub_job, ITEM_NET, "ItemNet", {"learning_rate": lr, "epochs": 2}, cancer, score=score)
        for lr, score in ((1e-2, 0.9), (3e-2, 0.8))
    ]
    job_id, _ = world.inference_job([m.trial_id for m in members])
    specs = [m.worker for m in load_job(world.settings, job_id).revision.versions[0].members]
    log = world.work / "fused-item.log"
    worker = FusedInferenceWorker(specs, log_path=log)
    rows = tabular_frame("breast_cancer").drop(columns="target").to_numpy()[:6].tolist()
    try:
        assert worker.start(timeout=60) == {}
        for _ in range(2):
            answers = worker.predict(rows, timeout=60)
            for member in members:
                np.testing.assert_allclose(answers[member.trial_id], member.model.predict(rows), rtol=0, atol=ATOL)
    finally:
        worker.close()
    text = log.read_text()
    # Tried stacked once; then, since each member answered on its own, never again.
    assert text.count("the stacked pass failed; each member answers this batch on its own") == 1, text
    assert "every member answered on its own: they answer one by one from now on" in text
