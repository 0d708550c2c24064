"""Deterministic mode (the job option ``deterministic``): the same trials for a seed, whatever the workers.

The real job driver, strategies and store run one job against a :class:`SimulatedCluster` on a
virtual clock, once on one slot and once on three, each run with trial lengths of its own
(log-normal, drawn from a seed per run): trials finish in another order each time, and on
three slots several run at once. The trials' knobs in trial-number order, and the best
configuration, must be the same; without the option they are not (the control that shows the
comparison can fail). A driver replaced halfway, as after a crash, goes on with the same proposals.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, select

from baobab import Settings
from baobab.advisor import JobDriver, JobOptions, RandomStrategy, TrialRecord, TrialStatus, check_job_plan
from baobab.advisor._deterministic import WINDOW, WindowWait, check_deterministic
from baobab.advisor._plans import Outcome, PlanStep
from baobab.advisor._scheduling import ActiveTrial, JobState, SubJobState, record_finished
from baobab.exceptions import StrategyError
from baobab.model import FloatKnob
from baobab.store import (
    JobStatus,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)
from baobab.testing import SimulatedCluster, SimulatedWork, VirtualClock, add_simulated_jobs, run_simulation
from baobab.testing._synthetic import branin_knob_config

TRIALS = 40


@dataclass(frozen=True)
class RandomLengths(SimulatedWork):
    """Trial lengths drawn from ``run_seed`` and the trial id (each run has its own), scores from the knobs alone
    (a template whose training is seeded by the trial's number scores the same knobs the same)."""

    run_seed: int = 0

    def draw(self, trial_id: int, knobs: Any) -> tuple[float, float]:
        rng = np.random.default_rng([self.run_seed, trial_id])
        return self.median_s * math.exp(self.spread * float(rng.standard_normal())), self.score(knobs)


@dataclass
class Run:
    knobs: list[dict[str, Any]]  # by trial number
    best: dict[str, Any]
    status: JobStatus
    record: dict[str, Any] | None  # what the window cost, as stored on the job
    max_running: int


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[Any]:
    made: list[Engine] = []

    def make(name: str) -> Engine:
        url = f"sqlite:///{tmp_path / name}.db"
        upgrade_database(url)
        engine = create_engine_from_url(url)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


def _driver(engine: Engine, cluster: SimulatedCluster, events: LocalEventChannel, tmp_path: Path) -> JobDriver:
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=2)
    return JobDriver(engine, cluster, events, settings, clock=cluster.clock, stop_check_s=3600)


def _result(engine: Engine, job_id: int, max_running: int) -> Run:
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
        assert job is not None
        rows = session.execute(
            select(Trial.number, Trial.knobs, Trial.score, Trial.status)
            .join(SubJob, Trial.sub_job_id == SubJob.id)
            .where(SubJob.train_job_id == job_id)
            .order_by(Trial.number)
        ).all()
        status, placement = job.status, dict(job.placement or {})
    assert [row.number for row in rows] == list(range(len(rows)))
    assert all(row.status is TrialState.COMPLETED for row in rows)
    best = max(rows, key=lambda row: (row.score, -row.number))
    return Run([dict(row.knobs) for row in rows], dict(best.knobs), status, placement.get("deterministic"), max_running)


def run_job(
    engines: Any,
    tmp_path: Path,
    *,
    name: str,
    strategy: str,
    slots: int,
    run_seed: int,
    deterministic: bool = True,
    spread: float = 1.0,
    restart_after: int | None = None,
    trials: int = TRIALS,
) -> Run:
    """One job of ``trials`` Branin trials on ``slots`` slots (3 at once at most), to its end.

    ``restart_after``: the driver is dropped once that many trials ended and a new one takes the job up
    (the cluster's trials go on running, as a worker's do while the platform restarts)."""
    engine = engines(name)
    events = LocalEventChannel()
    clock = VirtualClock()
    work = RandomLengths(median_s=60.0, spread=spread, run_seed=run_seed)
    cluster = SimulatedCluster(engine, events, clock, slots=slots, work=work)
    options = {"deterministic": True} if deterministic else {}
    (job_id,) = add_simulated_jobs(
        engine, events, jobs=1, trials=trials, gpus=3, strategies=(strategy,), options=options
    )
    most = 0

    def watch(_: Any) -> None:
        nonlocal most
        most = max(most, cluster.busy)

    if restart_after is not None:
        first = _driver(engine, cluster, events, tmp_path)
        run_simulation(first, cluster, until=lambda: cluster.report.trials >= restart_after, on_loop=watch)
        assert cluster.active(), "the driver is replaced while trials run"
    run_simulation(_driver(engine, cluster, events, tmp_path), cluster, max_virtual_s=30 * 24 * 3600, on_loop=watch)
    return _result(engine, job_id, most)


@pytest.mark.parametrize(
    ("strategy", "trials"),
    # auto runs bayes on Branin's three knobs (5 random points, then a GP fitted per proposal: 20 trials keep it short)
    [("tpe", TRIALS), ("evolution", TRIALS), ("random", TRIALS), ("auto", 20)],
)
def test_one_and_three_workers_give_the_same_trials_and_best(
    engines: Any, tmp_path: Path, strategy: str, trials: int
) -> None:
    one = run_job(engines, tmp_path, name="one", strategy=strategy, slots=1, run_seed=1, trials=trials)
    three = run_job(engines, tmp_path, name="three", strategy=strategy, slots=3, run_seed=2, trials=trials)

    assert one.status is three.status is JobStatus.COMPLETED
    assert three.max_running == 3 and one.max_running == 1  # three trials did run at once
    assert len(one.knobs) == len(three.knobs) == trials
    for number, (a, b) in enumerate(zip(one.knobs, three.knobs, strict=True)):
        assert a == b, f"trial {number}: {a} on one worker, {b} on three"
    assert one.best == three.best


def test_without_the_option_the_workers_change_the_trials(engines: Any, tmp_path: Path) -> None:
    """The control: the comparison above fails where the mode is off (proposals learn from what finished)."""
    one = run_job(engines, tmp_path, name="one", strategy="tpe", slots=1, run_seed=1, deterministic=False)
    three = run_job(engines, tmp_path, name="three", strategy="tpe", slots=3, run_seed=2, deterministic=False)
    assert one.knobs[:10] == three.knobs[:10]  # TPE's random start-up trials learn from nothing
    assert one.knobs != three.knobs
    assert one.record is None and three.record is None


def test_a_driver_replaced_halfway_goes_on_with_the_same_proposals(engines: Any, tmp_path: Path) -> None:
    whole = run_job(engines, tmp_path, name="whole", strategy="tpe", slots=1, run_seed=1)
    replaced = run_job(engines, tmp_path, name="replaced", strategy="tpe", slots=3, run_seed=3, restart_after=17)
    assert replaced.knobs == whole.knobs
    assert replaced.best == whole.best


def test_the_wait_is_measured_and_stored_on_the_job(engines: Any, tmp_path: Path) -> None:
    """Three slots and trial lengths spread wide: a trial 9 numbers back still runs while slots are free, and
    the job waits for it. One slot never waits (the window is wider than one trial)."""
    three = run_job(engines, tmp_path, name="three", strategy="random", slots=3, run_seed=2, spread=1.5)
    one = run_job(engines, tmp_path, name="one", strategy="random", slots=1, run_seed=1, spread=1.5)

    assert three.record is not None and one.record is not None
    assert three.record["window"] == one.record["window"] == WINDOW
    assert three.record["wait_s"] > 0
    # Idle slot-seconds: at least the seconds with a slot held, at most two slots held each second (one runs).
    assert three.record["wait_s"] <= three.record["idle_slot_s"] <= 2 * three.record["wait_s"] + 1e-6
    assert one.record["wait_s"] == one.record["idle_slot_s"] == 0


# -- the rules, without a store ----------------------------------------------------------------------------------


def _sub(window: int | None = 2) -> tuple[JobState, SubJobState]:
    job = JobState(id=1, created_at=0.0, cap=4, trial_count=20, window_wait=None if window is None else WindowWait())
    sub = SubJobState(
        id=1,
        job_id=1,
        model_name="m",
        strategy_name="random",
        seed=0,
        knob_config={"x": FloatKnob(0.0, 1.0)},
        trial_count=20,
        max_errors=3,
        searchable=frozenset({"x"}),
        window=window,
    )
    job.sub_jobs[sub.id] = sub
    return job, sub


def _start(sub: SubJobState, number: int) -> ActiveTrial:
    trial = ActiveTrial(id=100 + number, number=number, proposal={"x": number / 10})
    sub.add_started(trial)
    sub.active[trial.id] = trial
    sub.trials += 1
    sub.next_number = number + 1
    return trial


def test_the_next_trial_waits_for_every_trial_below_it_minus_the_window() -> None:
    job, sub = _sub(window=2)
    trials = [_start(sub, n) for n in range(4)]  # trial 4 needs 0 and 1 ended
    assert sub.next_step(job, 0.0) is Outcome.WAIT
    assert job.window_held(0.0, free=5) == 4 - len(sub.active)  # its cap's free room
    for trial in trials[:2][::-1]:  # 1 ends, then 0: out of order
        del sub.active[trial.id]
        record_finished(job, sub, trial, TrialState.COMPLETED, score=float(trial.number))
    assert isinstance(sub.next_step(job, 0.0), PlanStep)
    assert job.window_held(0.0, free=5) == 0

    # Trial 3 ended early too: the strategy learns 0 and 1 only, and counts 2 and 3 as pending, in number order.
    del sub.active[trials[3].id]
    record_finished(job, sub, trials[3], TrialState.COMPLETED, score=3.0)
    sub.strategy = RandomStrategy(sub.knob_config or {}, seed=0)
    sub.release_window(4)
    assert [record.trial_id for record in sub.strategy.history] == [0, 1]
    assert sorted(sub.held) == [3]
    assert sub.window_pending(4) == [{"x": 0.2}, {"x": 0.3}]


def test_without_the_window_nothing_waits_and_records_reach_the_strategy_at_once() -> None:
    job, sub = _sub(window=None)
    trials = [_start(sub, n) for n in range(4)]
    assert isinstance(sub.next_step(job, 0.0), PlanStep)
    assert job.window_held(0.0, free=5) == 0
    del sub.active[trials[3].id]
    record_finished(job, sub, trials[3], TrialState.COMPLETED, score=3.0)
    assert sub.history == [TrialRecord(3, {"x": 0.3}, TrialStatus.COMPLETED, 3.0)] and not sub.held


def test_shared_parameters_come_from_trials_below_the_window_only() -> None:
    _, sub = _sub(window=2)
    # (score, number, params) in the order trials finished: 5 ended last but is inside trial 6's window.
    sub.shared = [(0.9, 1, "p1"), (0.5, 3, "p3"), (0.1, 0, "p0"), (0.99, 5, "p5")]
    assert sub.shared_params(None, 6) == "p3"  # the highest-numbered below 4, not the last to end
    assert sub.shared_params(5, 6) == "p3"  # a parent inside the window is not waited for
    sub.options = JobOptions(share_from="best")
    assert sub.shared_params(None, 6) == "p1"
    assert sub.shared_params(None, 2) is None
    _, plain = _sub(window=None)
    plain.shared = list(sub.shared)
    assert plain.shared_params(None, 6) == "p5"  # without the window: the last to finish


def test_window_wait_adds_up_idle_slots_between_passes() -> None:
    wait = WindowWait()
    assert not wait.note(0, 10.0)
    assert not wait.note(2, 10.0)  # two slots held from 10 s
    assert not wait.note(1, 13.0)  # one from 13 s
    assert wait.note(0, 20.0)  # the wait ended: worth storing
    assert (wait.wait_s, wait.idle_slot_s) == (10.0, 2 * 3 + 1 * 7)
    again = WindowWait.from_record(wait.record())
    assert (again.window, again.wait_s, again.idle_slot_s, again.held) == (WINDOW, 10.0, 13.0, 0)


@pytest.mark.parametrize(
    ("strategy", "options", "match"),
    [
        ("random", JobOptions(deterministic=True, stopping_rule="asha"), r"early stopping \(rule 'asha'\)"),
        ("tpe", JobOptions(deterministic=True, fusion="auto"), r"fusion \('auto'\).*set fusion to \"off\""),
        ("tpe", JobOptions(deterministic=True, fusion="max_group", max_group=4), r"fusion \('max_group'\)"),
        ("enas", JobOptions(deterministic=True), r"the enas strategy: its phases follow measured"),
    ],
)
def test_what_the_mode_cannot_repeat_is_refused(strategy: str, options: JobOptions, match: str) -> None:
    with pytest.raises(StrategyError, match=match):
        check_deterministic(strategy, options)
    with pytest.raises(StrategyError, match=match):  # at job creation (the admin API's 400) and in the driver
        check_job_plan(strategy, branin_knob_config(), options, trial_count=10, time_hours=None, workers=2)
    check_deterministic(strategy, JobOptions(**{**options.__dict__, "deterministic": False}))
