"""Fused trials on a real store (SQLite and PostgreSQL), with real worker processes.

A job with ``options.fusion = {"max_group": K}`` trains its trials in groups of up to K,
each group in one worker process as one stacked computation
(:func:`baobab.model.train_fused`), and each member stays a trial of its own: its claim,
metrics, logs, parameters, score and outcome, and its stop requests. The template is
``templates/tiny_torch.py``: a learning rate is its only searched knob, so a group's
members share their structure.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import select
from worker_world import Platform, driving

from baobab.advisor._scheduling import MIN_PROFILE_S, PROFILE_SHARE
from baobab.model import Task
from baobab.store import (
    Event,
    EventKind,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    add_train_job,
    fuse_trials,
    insert_trials,
    params_from_bytes,
    session_scope,
)
from baobab.testing import wait_until
from baobab.worker import LocalExecutor

TINY = ("tiny_torch.py", "TinyTorch")
WIDE = ("tiny_torch.py", "WideTinyTorch")
#: Rows of the validation set (worker_world): scores are accuracies in steps of 1/40.
VAL_ROWS = 40
#: test_fused.py's tolerances: parameters with a gradient, per-epoch losses, scores (two examples).
ATOL, LOSS_ATOL, SCORE_ATOL = 3e-6, 1e-6, 2 / VAL_ROWS
DIVERGED = (
    r"the training loss is (nan|inf) in epoch \d+, batch \d+: training diverged \(is the learning rate too high\?\)"
)


def _job(platform: Platform, fusion: object, *, trials: int = 6, template: tuple[str, str] = TINY) -> int:
    """A PENDING train job of ``trials`` trials of ``template``, seeded 1 (every such job proposes alike)."""
    with session_scope(platform.engine) as session:
        job = add_train_job(
            session,
            owner_id=platform.owner_id,
            app=f"fused-{uuid.uuid4().hex[:8]}",
            app_version=1,
            task=Task.TABULAR_CLASSIFICATION,
            train_dataset_id=platform.datasets[0],
            val_dataset_id=platform.datasets[1],
            budget={"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
            train_args={"signal_dir": str(platform.signal_dir)},
            target="y",
            options={"warm_start": False, "fusion": fusion},
            seed=1,
            sub_jobs=[(platform.template(*template), "random")],
        )
        return job.id


def _trials(platform: Platform, job_id: int) -> list[Trial]:
    query = select(Trial.id).join(SubJob, Trial.sub_job_id == SubJob.id).where(SubJob.train_job_id == job_id)
    with session_scope(platform.engine) as session:
        ids = list(session.scalars(query.order_by(Trial.number)))
    return [platform.trial(i) for i in ids]


def _job_status(platform: Platform, job_id: int):
    with session_scope(platform.engine) as session:
        return session.get_one(TrainJob, job_id).status


def _params(platform: Platform, trial: Trial) -> dict:
    assert trial.params_path is not None
    return params_from_bytes(platform.artifacts.get_bytes(trial.params_path))


def test_a_job_trains_its_trials_in_groups_each_as_it_would_alone(platform: Platform) -> None:
    events = LocalEventChannel()
    with driving(platform, events, workers=1):
        fused_job, alone_job = _job(platform, {"max_group": 3}), _job(platform, "off")
        for job_id in (fused_job, alone_job):
            events.publish(Event(EventKind.JOB_CREATED, job_id))
        for job_id in (fused_job, alone_job):
            wait_until(lambda j=job_id: _job_status(platform, j).is_finished(), timeout=300, what="the jobs to end")

    fused, alone = _trials(platform, fused_job), _trials(platform, alone_job)
    assert [t.status for t in fused + alone] == [TrialState.COMPLETED] * 12, [(t.status, t.error) for t in fused]
    sizes = Counter(t.fused_group for t in fused)
    assert None not in sizes and sorted(sizes.values()) == [3, 3]  # one slot: two groups of three
    assert {t.worker for t in fused if t.fused_group == min(sizes)} == {fused[0].worker}  # one process a group
    assert all(t.fused_group is None for t in alone)
    assert not [line for t in fused for line in platform.logs(t.id) if line.startswith("not fused")]  # stacked
    for mine, theirs in zip(fused, alone, strict=True):
        assert mine.knobs == theirs.knobs  # the same proposal for the same trial number, fused or not
        assert mine.score == pytest.approx(theirs.score, abs=SCORE_ATOL)
        ours, reference = _params(platform, mine), _params(platform, theirs)
        assert ours.keys() == reference.keys()
        for key, value in reference.items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                np.testing.assert_allclose(ours[key], value, rtol=0, atol=ATOL, err_msg=key)
        mine_metrics, their_metrics = platform.metrics(mine.id), platform.metrics(theirs.id)
        assert [step for step, _ in mine_metrics] == [step for step, _ in their_metrics] == [0, 1, 2, 3]
        for (_, ours_m), (_, theirs_m) in zip(mine_metrics, their_metrics, strict=True):
            assert ours_m["loss"] == pytest.approx(theirs_m["loss"], abs=LOSS_ATOL)


def test_a_profile_stops_at_the_time_budget_the_driver_gave(platform: Platform, executor) -> None:
    ids = _group(platform, [3e-2, 5e-2])
    with session_scope(platform.engine) as session:
        session.get_one(Trial, ids[0]).fusion_profile = {"max_group": 4, "budget_s": 0.0}
    executor.submit(ids)
    assert _finished(executor, ids) == Counter(ids)
    profile = platform.trial(ids[0]).fusion_profile
    assert profile is not None and set(profile["samples_per_s"]) == {"1"} and profile["best"] == 1, profile
    assert profile["reason"] == "the profile's 0 s were spent before size 2"


# -- fusion "auto": measured, then sized by the measurement -----------------------------------------

PROFILE_KEYS = {"max_group", "samples_per_s", "best", "seconds", "reason"}


def test_under_auto_the_trial_after_the_first_completed_one_measures_and_later_groups_take_its_size(
    platform: Platform,
) -> None:
    events = LocalEventChannel()
    with driving(platform, events, workers=1):
        job_id = _job(platform, "auto", trials=8)
        events.publish(Event(EventKind.JOB_CREATED, job_id))
        wait_until(lambda: _job_status(platform, job_id).is_finished(), timeout=300, what="the job to end")
    trials = _trials(platform, job_id)
    assert [t.status for t in trials] == [TrialState.COMPLETED] * 8, [(t.status, t.error) for t in trials]
    alone, first, *rest = trials  # the first trial completed before anyone knew what measuring may cost
    assert alone.fusion_profile is None and alone.started_at is not None and alone.finished_at is not None
    budget = PROFILE_SHARE * (alone.finished_at - alone.started_at).total_seconds()  # a share of the time it ran
    if budget < MIN_PROFILE_S:  # a trial too short to pay for a measurement (most machines): none measures
        assert all(t.fusion_profile is None and t.fused_group is None for t in trials)
        return
    profile = first.fusion_profile  # one structure (a learning rate is all that varies): measured once
    # no larger group than the sub-job's 7 trials left is timed, within the budget
    assert profile is not None and set(profile) == {*PROFILE_KEYS, "budget_s"} and profile["max_group"] == 7, profile
    assert profile["budget_s"] == pytest.approx(budget, abs=1e-3)
    assert all(t.fusion_profile is None for t in rest) and first.fused_group is None
    sizes = {int(k) for k in profile["samples_per_s"]}
    assert 1 in sizes and profile["best"] in sizes and profile["seconds"] > 0
    assert any(line.startswith("fusion profile (") for line in platform.logs(first.id))
    # Later groups take the measured size at most (what is left of the count may cut the last one).
    groups = Counter(t.fused_group for t in rest if t.fused_group is not None)
    assert all(size <= profile["best"] for size in groups.values())
    if profile["best"] == 1:
        assert not groups
    # Each trial trains as it would alone: the measurement before training left nothing behind.
    assert not [line for t in trials for line in platform.logs(t.id) if line.startswith("not fused")]


def test_a_stored_profile_sizes_the_groups_of_a_job_taken_up_again(platform: Platform) -> None:
    """A profile measured before (a driver restarted, say) is read back from the rows: no trial measures again."""
    job_id = _job(platform, "auto", trials=7)
    measured = {"max_group": 64, "samples_per_s": {"1": 100.0, "2": 150.0, "3": 300.0}, "best": 3, "seconds": 1.0,
                "reason": None}  # fmt: skip
    with session_scope(platform.engine) as session:
        sub_job_id = session.scalars(select(SubJob.id).where(SubJob.train_job_id == job_id)).one()
        (measuring,) = insert_trials(
            session, [{"sub_job_id": sub_job_id, "number": 0, "knobs": {"learning_rate": 0.05, "width": 8,
            "epochs": 4, "batch_size": 8}, "policies": {}, "phase": None, "servable": True,
            "shared_params_path": None, "fusion_profile": measured}], now=datetime.now(UTC),
        )  # fmt: skip
    platform.set_status(measuring, TrialState.ERRORED)  # it measured, then failed: the measurement stands
    events = LocalEventChannel()
    with driving(platform, events, workers=1):
        events.publish(Event(EventKind.JOB_CREATED, job_id))
        wait_until(lambda: _job_status(platform, job_id).is_finished(), timeout=300, what="the job to end")
    rest = _trials(platform, job_id)[1:]
    assert [t.status for t in rest] == [TrialState.COMPLETED] * 6
    assert all(t.fusion_profile is None for t in rest)
    assert sorted(Counter(t.fused_group for t in rest).values()) == [3, 3]  # 6 trials left: two groups of 3


# -- a group handed straight to the executor -------------------------------------------------------


def _group(
    platform: Platform, learning_rates: list[float], template: tuple[str, str] = TINY, shared: str | None = None
) -> list[int]:
    """PENDING trials of a fresh sub-job, one per learning rate, fused into one group (each starting
    from the parameters ``shared``, an artifact key, when given)."""
    job_id = _job(platform, {"max_group": len(learning_rates)}, template=template)
    knobs = {"width": 8, "epochs": 4, "batch_size": 8}
    with session_scope(platform.engine) as session:
        sub_job_id = session.scalars(select(SubJob.id).where(SubJob.train_job_id == job_id)).one()
        ids = insert_trials(
            session,
            [
                {
                    "sub_job_id": sub_job_id,
                    "number": number,
                    "knobs": {**knobs, "learning_rate": lr},
                    "policies": {},
                    "phase": None,
                    "servable": True,
                    "shared_params_path": shared,
                }
                for number, lr in enumerate(learning_rates)
            ],
            now=datetime.now(UTC),
        )
        fuse_trials(session, ids)
    return ids


@pytest.fixture
def executor(platform: Platform):
    events = LocalEventChannel()
    finished = events.subscribe(EventKind.TRIAL_FINISHED)
    settings = dataclasses.replace(platform.settings, cpu_slots=1)
    with LocalExecutor(settings, events, api_url=platform.api_url, workers=1) as executor:
        executor.finished = finished  # type: ignore[attr-defined]
        yield executor
    finished.close()


def _finished(executor: LocalExecutor, trial_ids: list[int], timeout: float = 120) -> Counter[int]:
    """Wait until every trial's TRIAL_FINISHED came; how many times each came (waiting a little for repeats)."""
    seen: Counter[int] = Counter()
    wait_until(
        lambda: _drain(executor, seen) and set(trial_ids) <= set(seen), timeout=timeout, what="the trials to end"
    )
    wait_until(lambda: not executor.active(), what="the executor to let them go")
    _drain(executor, seen)
    return seen


def _drain(executor: LocalExecutor, seen: Counter[int]) -> bool:
    event = executor.finished.get(timeout=0)
    while event is not None:
        seen[event.id] += 1
        event = executor.finished.get(timeout=0)
    return True


def test_a_diverging_member_ends_errored_alone_and_its_group_mates_complete(platform: Platform, executor) -> None:
    ids = _group(platform, [3e-2, 1e6, 1e-1], template=WIDE)
    executor.submit(ids)
    assert _finished(executor, ids) == Counter(ids)
    ok, diverged, also_ok = (platform.trial(i) for i in ids)
    assert diverged.status is TrialState.ERRORED and re.fullmatch(DIVERGED, diverged.error), diverged.error
    assert diverged.score is None and diverged.params_path is None
    assert re.fullmatch(DIVERGED, platform.logs(diverged.id)[-1])
    for trial in (ok, also_ok):
        assert trial.status is TrialState.COMPLETED and trial.score is not None
        assert [step for step, _ in platform.metrics(trial.id)] == [0, 1, 2, 3]
        assert trial.fused_group == ids[0] and trial.worker == ok.worker


def test_a_stop_request_stops_only_its_member(platform: Platform, executor) -> None:
    ids = _group(platform, [3e-2, 5e-2, 1e-1])
    hold = platform.signal_dir / "hold"
    hold.touch()
    executor.submit(ids)
    wait_until(lambda: list(platform.signal_dir.glob("training-*")), timeout=60, what="the group to train")
    executor.request_stop(ids[0], "stopped by a user")
    wait_until((platform.signal_dir / "stop-seen").exists, what="the stop to reach the member")
    hold.unlink()
    _finished(executor, ids)
    stopped, *others = (platform.trial(i) for i in ids)
    assert stopped.status is TrialState.STOPPED and stopped.score is not None and stopped.params_path is not None
    assert platform.logs(stopped.id)[-1] == "stopped early: stopped by a user"
    assert len(platform.metrics(stopped.id)) < 4
    for trial in others:
        assert trial.status is TrialState.COMPLETED
        assert [step for step, _ in platform.metrics(trial.id)] == [0, 1, 2, 3]


def test_a_group_whose_process_dies_mid_step_is_requeued_as_separate_trials(platform: Platform, executor) -> None:
    ids = _group(platform, [3e-2, 5e-2, 1e-1])
    hold = platform.signal_dir / "hold"
    hold.touch()
    executor.submit(ids)
    (training,) = wait_until(
        lambda: list(platform.signal_dir.glob("training-*")), timeout=60, what="the group to train"
    )
    assert [platform.trial(i).status for i in ids] == [TrialState.RUNNING] * 3
    pid = int(training.name.removeprefix("training-"))
    os.kill(pid, signal.SIGKILL)  # the OOM killer, say
    hold.unlink()
    assert _finished(executor, ids) == Counter(ids)  # each member accounted for once
    trials = [platform.trial(i) for i in ids]
    assert [t.status for t in trials] == [TrialState.COMPLETED] * 3, [(t.status, t.error) for t in trials]
    assert [t.attempts for t in trials] == [2, 2, 2]  # the group's claim, then its own
    assert all(t.fused_group is None for t in trials)  # it ran again alone
    assert len({t.worker for t in trials}) == 1 and not trials[0].worker.endswith(f":{pid}")
    assert len(list(platform.signal_dir.glob("training-*"))) == 2  # the dead process, then the one that replaced it


def test_a_group_starts_from_shared_parameters_held_in_memory(platform: Platform, executor) -> None:
    """SHARE_PARAMS between units of one worker: the parameters a group produced reach the next group's
    members from memory (read once for them all), not from the artifact store."""
    first = _group(platform, [3e-2, 5e-2, 1e-1])
    executor.submit(first)
    _finished(executor, first)
    source = platform.trial(first[1])
    assert source.status is TrialState.COMPLETED and source.params_path is not None
    platform.artifacts.delete(source.params_path)  # only the worker's memory has them now
    second = _group(platform, [2e-2, 4e-2, 8e-2], shared=source.params_path)
    executor.submit(second)
    _finished(executor, second)
    for trial_id in second:
        trial = platform.trial(trial_id)
        assert trial.status is TrialState.COMPLETED, trial.error
        assert f"starting from shared parameters {source.params_path} (from memory)" in platform.logs(trial_id)


def test_a_groups_first_member_measures_before_the_group_trains(platform: Platform, executor) -> None:
    """Under "auto" a structure not measured yet may run in a group sized by a nearer one's profile: its
    first member measures before the group trains, and keeps the measurement whatever the group does."""
    ids = _group(platform, [3e-2, 5e-2, 1e-1])
    with session_scope(platform.engine) as session:
        session.get_one(Trial, ids[0]).fusion_profile = {"max_group": 4}
    executor.submit(ids)
    assert _finished(executor, ids) == Counter(ids)
    first, *rest = (platform.trial(i) for i in ids)
    assert first.fusion_profile is not None and set(first.fusion_profile) == PROFILE_KEYS
    assert set(first.fusion_profile["samples_per_s"]) == {"1", "2", "4"}
    assert [line for line in platform.logs(first.id) if line.startswith("fusion profile (")]
    assert all(t.fusion_profile is None for t in rest)
    assert all(t.status is TrialState.COMPLETED and t.fused_group == ids[0] for t in [first, *rest])
    assert not [line for i in ids for line in platform.logs(i) if line.startswith("not fused")]
    # Where each member's time went: the measuring is the first member's own; the stacked training is
    # split evenly (each member's own data loading taken out first), so the members' seconds add up to
    # no more than the group ran (each counting the whole of the shared fetch and training would not).
    spent = [t.time_breakdown for t in (first, *rest)]
    assert all(s is not None for s in spent)
    assert spent[0]["profile"] > 0 and all("profile" not in s for s in spent[1:]), spent
    assert len({s["train"] for s in spent}) == 1 and all(s["fetch"] > 0 and s["store"] > 0 for s in spent), spent
    started = min(t.started_at for t in (first, *rest) if t.started_at is not None)
    finished = max(t.finished_at for t in (first, *rest) if t.finished_at is not None)
    assert sum(sum(s.values()) for s in spent) <= (finished - started).total_seconds(), spent


def test_a_profile_asked_of_a_template_that_is_no_torch_model_answers_alone_without_importing_torch() -> None:
    # torch takes seconds to import: a worker of plain templates paid them on every job's first trial.
    code = """
import sys
from baobab.store import TrialClaim
from baobab.worker._fusion_profile import measure_fusion
claim = TrialClaim(1, 1, 1, {}, {}, 0, "t", "c", "Plain", {}, "a", "b", "c", "d", fusion_profile={"max_group": 8})
profile = measure_fusion(claim, None, {}, "", "", None, False)
assert profile["best"] == 1 and profile["max_group"] == 8 and "not a TorchModel" in profile["reason"], profile
assert "torch" not in sys.modules, "answering the profile imported torch"
"""
    subprocess.run([sys.executable, "-c", code], check=True)
