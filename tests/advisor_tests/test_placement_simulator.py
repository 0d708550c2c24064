"""The placement simulator on plans whose makespans can be worked out by hand."""

from __future__ import annotations

import math

import pytest

from baobab.advisor.placement import Estimate, Job, Launch, Machine, Pending, simulate


def _play(plan, *, machines, jobs=None, pending=None, seconds=10.0, memory=0.0, fraction=1.0):
    trials = {t for launch in plan for t in launch.trials}
    pending = pending or {t: Pending(t, job=1, kind="k", structure="s", fraction=fraction) for t in trials}
    jobs = jobs or {1: Job(1, cap=100)}

    def estimate(launch: Launch) -> Estimate:
        return Estimate(seconds=seconds * len(launch.trials), memory=memory)

    return simulate(tuple(plan), machines=machines, jobs=jobs, pending=pending, estimate=estimate)


def _singles(n: int, **kwargs) -> list[Launch]:
    return [Launch((t,), **kwargs) for t in range(n)]


def test_two_slots_run_four_trials_in_two_rounds() -> None:
    outcome = _play(_singles(4), machines=[Machine("m", cores=2, slots=2)])
    assert outcome.makespan == 20.0
    assert outcome.utilisation == 1.0
    assert (outcome.finished, outcome.unfinished) == (4, 0)
    assert outcome.starts == (0.0, 0.0, 10.0, 10.0)
    assert outcome.job_finish == {1: 20.0}


def test_a_launch_with_all_the_threads_runs_alone() -> None:
    plan = [Launch((0,), threads=2), *_singles(2, threads=1)[1:]] + [Launch((2,), threads=1)]
    outcome = _play(plan, machines=[Machine("m", cores=2, slots=2)])
    assert outcome.starts == (0.0, 10.0, 10.0)
    assert outcome.makespan == 20.0


def test_a_job_s_cap_serialises_its_trials() -> None:
    outcome = _play(_singles(3), machines=[Machine("m", cores=4, slots=4)], jobs={1: Job(1, cap=1)})
    assert outcome.makespan == 30.0
    assert outcome.utilisation == pytest.approx(0.25)


def test_a_deadline_cuts_what_runs_and_starts_nothing_after_it() -> None:
    outcome = _play(_singles(6), machines=[Machine("m", cores=2, slots=2)], jobs={1: Job(1, cap=2, deadline=15.0)})
    # 0 and 1 end at 10; 2 and 3 start at 10 and are stopped at 15; 4 and 5 never start
    assert (outcome.finished, outcome.unfinished) == (2, 4)
    assert outcome.makespan == 15.0
    assert outcome.starts[4:] == (None, None)


def test_memory_keeps_two_units_apart_and_one_too_big_makes_the_plan_infeasible() -> None:
    host = [Machine("m", cores=2, slots=2, memory=100.0)]
    assert _play(_singles(2), machines=host, memory=60.0).makespan == 20.0
    too_big = _play(_singles(2), machines=host, memory=150.0)
    assert not too_big.feasible and too_big.makespan == math.inf


def test_units_share_a_gpu_by_memory() -> None:
    gpu = [Machine("g", cores=8, slots=8, gpus=1, memory=100.0)]
    jobs = {1: Job(1, cap=8, gpus=1)}
    assert _play(_singles(4, devices=1), machines=gpu, jobs=jobs, memory=40.0).makespan == 20.0  # two at a time
    two_gpus = [Machine("g", cores=8, slots=8, gpus=2, memory=100.0)]
    # GPU_COUNT 1: one device at a time whatever the machine has
    assert _play(_singles(4, devices=1), machines=two_gpus, jobs=jobs, memory=80.0).makespan == 40.0
    jobs2 = {1: Job(1, cap=8, gpus=2)}
    assert _play(_singles(4, devices=1), machines=two_gpus, jobs=jobs2, memory=80.0).makespan == 20.0


def test_a_named_machine_is_kept_and_an_unnamed_launch_takes_the_first_with_room() -> None:
    machines = [Machine("a", cores=1), Machine("b", cores=1)]
    pinned = _play(_singles(2, machine="a"), machines=machines)
    assert pinned.makespan == 20.0
    free = _play(_singles(2), machines=machines)
    assert free.makespan == 10.0 and free.utilisation == 1.0
    gone = _play(_singles(1, machine="c"), machines=machines)
    assert not gone.feasible


def test_early_stopping_shortens_a_launch_by_its_members_expected_share() -> None:
    outcome = _play(_singles(2), machines=[Machine("m", cores=1)], fraction=0.25)
    assert outcome.makespan == 5.0
    group = _play(
        [Launch((0, 1))],
        machines=[Machine("m", cores=1)],
        pending={0: Pending(0, 1, "k", "s", fraction=0.25), 1: Pending(1, 1, "k", "s", fraction=0.5)},
    )
    assert group.makespan == 10.0  # 20 s for the group of two, run until its longest member's half
