"""Shared weights that add up: the driver's merge of concurrent shared trainings, on real parameter files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from baobab.advisor import EnasPlanner
from baobab.advisor._plans import EnasPlan
from baobab.advisor._scheduling import (
    ActiveTrial,
    JobState,
    SharedUpdate,
    SubJobState,
    record_finished,
    shared_key,
)
from baobab.advisor.driver._shared_weights import add_update, write_updates
from baobab.enums import TrialState
from baobab.model import ArchKnob, PolicyKnob
from baobab.store import ArtifactStore, params_from_bytes, params_to_bytes

CONFIG = {"arch": ArchKnob([[0, 1]]), "share": PolicyKnob("SHARE_PARAMS"), "skip": PolicyKnob("SKIP_TRAIN")}


def test_an_update_is_added_onto_the_latest_weights() -> None:
    start = {"w": np.array([1.0, 1.0], dtype=np.float32), "n": np.array(3), "seed": 1, "mask": np.array([True])}
    latest = {"w": np.array([1.5, 1.0], dtype=np.float32), "n": np.array(5), "seed": 2, "mask": np.array([False])}
    result = {"w": np.array([1.0, 0.25], dtype=np.float32), "n": np.array(4), "seed": 3, "mask": np.array([True])}
    merged = add_update(latest, start, {**result, "extra": np.zeros(2)})
    np.testing.assert_array_equal(merged["w"], np.array([1.5, 0.25], dtype=np.float32))  # both changes kept
    assert merged["w"].dtype == np.float32 and int(merged["n"]) == 6  # counts add up too
    assert merged["seed"] == 3 and merged["mask"].tolist() == [True]  # not numbers to add: the trial's own
    np.testing.assert_array_equal(merged["extra"], np.zeros(2))  # the others lack it: the trial's own
    shaped = add_update({"w": np.zeros(3)}, start, result)  # another shape in latest: the trial's own
    np.testing.assert_array_equal(shaped["w"], result["w"])
    # An entry only the latest weights hold (another trial added it meanwhile, a super-network's new
    # candidate) is kept; one the trial started with and dropped is not brought back.
    dropped = {"dropped": np.ones(1)}
    added = add_update({**latest, **dropped, "new": np.ones(2)}, {**start, **dropped}, result)
    np.testing.assert_array_equal(added["new"], np.ones(2))
    assert "dropped" not in added


def test_a_zero_dimensional_entry_stays_an_array_through_a_merge_and_the_store() -> None:
    # Batch norm's num_batches_tracked: numpy makes a 0-d sum a scalar, which the store kept as a plain number.
    count = {"norm.num_batches_tracked": np.array(7, dtype=np.int64)}
    added = add_update(count, {"norm.num_batches_tracked": np.array(5, dtype=np.int64)}, count)
    stored = params_from_bytes(params_to_bytes(added))["norm.num_batches_tracked"]
    assert isinstance(stored, np.ndarray) and stored.shape == () and stored.dtype == np.int64 and int(stored) == 9


def test_a_shared_key_sits_beside_the_trials_parameters_one_per_merge() -> None:
    assert shared_key("params/trial-7.safetensors", 5) == "params/trial-7-shared-onto-5.safetensors"
    assert shared_key("a/b.c/params", 12) == "a/b.c/params-shared-onto-12"


def _sub() -> SubJobState:
    sub = SubJobState(
        id=1, job_id=1, model_name="m", strategy_name="enas", seed=0, knob_config=CONFIG, trial_count=20, max_errors=3
    )
    sub.plan = EnasPlan(EnasPlanner(CONFIG, trial_budget=20))
    return sub


def _finish(
    job: JobState, sub: SubJobState, trial_id: int, started_from: str | None, store: ArtifactStore
) -> list[SharedUpdate]:
    """Trial ``trial_id`` ends; the updates whose weights are then written (what the driver records as merges)."""
    params = f"params/trial-{trial_id}.safetensors"
    trial = ActiveTrial(trial_id, trial_id, {"arch": [0]}, phase="train_shared", shares=True, shared_from=started_from)
    record_finished(job, sub, trial, TrialState.COMPLETED, score=0.5, duration=1.0, params=params)
    return write_updates(store, sub)


def test_two_trainings_from_the_same_weights_both_reach_the_shared_weights(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    for trial_id, w in ((1, [1.0, 1.0]), (2, [2.0, 1.0]), (3, [1.0, 3.0])):
        store.put_bytes(f"params/trial-{trial_id}.safetensors", params_to_bytes({"w": np.array(w)}))
    job, sub = JobState(id=1, created_at=0.0, cap=2), _sub()
    _finish(job, sub, 1, None, store)
    assert sub.shared_params() == "params/trial-1.safetensors"
    _finish(job, sub, 2, "params/trial-1.safetensors", store)  # started from 1, nothing shared since: as is
    assert sub.shared_params() == "params/trial-2.safetensors"
    (written,) = _finish(job, sub, 3, "params/trial-1.safetensors", store)  # ran beside 2: added onto 2's weights
    key = sub.shared_params()
    assert key == shared_key("params/trial-3.safetensors", 2) == "params/trial-3-shared-onto-2.safetensors"
    assert (written.key, written.trial_id, written.onto) == (key, 3, 2)  # 3's update onto what 2 shared on
    np.testing.assert_array_equal(params_from_bytes(store.get_bytes(key))["w"], [2.0, 3.0])
    assert not sub.updates

    # A driver that replays the rows after a restart finds the weights written, and keeps them.
    store.put_bytes(key, params_to_bytes({"w": np.array([7.0, 7.0])}))
    replayed = _sub()
    for trial_id, started_from in ((1, None), (2, "params/trial-1.safetensors")):
        _finish(job, replayed, trial_id, started_from, store)
    assert _finish(job, replayed, 3, "params/trial-1.safetensors", store) == [written]  # recorded again: idempotent
    assert replayed.shared_params() == key
    np.testing.assert_array_equal(params_from_bytes(store.get_bytes(key))["w"], [7.0, 7.0])
    # One that died before writing them writes them on replay: the same sum.
    store.delete(key)
    again = _sub()
    for trial_id, started_from in ((1, None), (2, "params/trial-1.safetensors"), (3, "params/trial-1.safetensors")):
        _finish(job, again, trial_id, started_from, store)
    np.testing.assert_array_equal(params_from_bytes(store.get_bytes(key))["w"], [2.0, 3.0])


def test_an_update_that_cannot_be_written_hands_on_the_trials_own_parameters(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ArtifactStore(tmp_path)
    store.put_bytes("params/trial-1.safetensors", params_to_bytes({"w": np.ones(2)}))
    store.put_bytes("params/trial-3.safetensors", params_to_bytes({"w": np.ones(2)}))  # 2's file is gone
    job, sub = JobState(id=1, created_at=0.0, cap=2), _sub()
    _finish(job, sub, 1, None, store)
    sub.shared.append((0.5, 2, "params/trial-2.safetensors"))
    _finish(job, sub, 3, "params/trial-1.safetensors", store)
    assert sub.shared_params() == "params/trial-3.safetensors"
    assert not store.exists("params/trial-3-shared-onto-2.safetensors")
    assert "trial 3's update could not be added onto the shared weights params/trial-2.safetensors" in caplog.text


def test_plans_that_hand_on_one_trials_parameters_do_not_add_up(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    job, sub = JobState(id=1, created_at=0.0, cap=2), _sub()
    sub.plan = None  # a plain job with SHARE_PARAMS: the latest trial's own parameters
    _finish(job, sub, 1, None, store)
    _finish(job, sub, 2, "params/trial-0.safetensors", store)
    assert sub.shared_params() == "params/trial-2.safetensors" and not sub.updates
