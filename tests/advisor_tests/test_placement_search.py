"""The placement search: never worse than the baseline it starts from, within its time bound, and
finding what the baselines miss."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from baobab.advisor.placement import BASELINES, CostModel, Job, Machine, Pending, choose_plan, estimator
from baobab.advisor.placement._search import FAIR_SLACK


def _stopped_clock() -> float:
    """A clock that never moves: a search on it is bounded by ``max_steps`` alone, so that what it finds
    does not depend on how busy the machine is."""
    return 0.0


def _ticking(tick: float) -> Callable[[], float]:
    """A clock that moves ``tick`` seconds each time it is read (the search reads it once per plan)."""
    readings = iter(range(10**6))
    return lambda: tick * next(readings)


def _workload(seed: int) -> tuple[list[Pending], dict[int, Job], list[Machine], CostModel]:
    """Jobs of different templates, sizes and limits on a few machines, with measured costs."""
    rng = random.Random(seed)
    cost = CostModel()
    machines = [
        Machine(f"m{i}", cores=rng.choice((2, 4, 8)), slots=rng.choice((1, 2))) for i in range(rng.randint(1, 3))
    ]
    jobs, pending = {}, []
    for job_id in range(1, rng.randint(2, 5)):
        kind = f"t{job_id}"
        per_epoch = rng.uniform(1.0, 20.0)
        for epochs in (1, 2, 4):
            cost.observe(kind, "s", {"epochs": epochs}, seconds=per_epoch * epochs)
        if rng.random() < 0.5:
            cost.observe_profile(kind, "s", {1: 100.0, 2: 170.0, 4: 260.0, 8: 300.0})
        jobs[job_id] = Job(job_id, cap=rng.randint(1, 4), max_group=rng.choice((1, 8)))
        for _ in range(rng.randint(2, 12)):
            pending.append(Pending(len(pending), job_id, kind, "s", {"epochs": rng.choice((1, 2, 4))}))
    rng.shuffle(pending)
    return pending, jobs, machines, cost


@pytest.mark.parametrize("seed", range(12))
def test_the_search_is_never_worse_than_the_baseline_it_starts_from(seed: int) -> None:
    pending, jobs, machines, cost = _workload(seed)
    found = choose_plan(
        pending, machines=machines, jobs=jobs, cost=cost, max_steps=300, seed=seed, clock=_stopped_clock
    )
    for name in BASELINES:
        baseline = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method=name)
        if name == found.start:  # what the search weighs (no trial is late or unfinished here)
            mine, theirs = found.outcome, baseline.outcome
            assert mine.makespan + mine.completion <= theirs.makespan + theirs.completion + 1e-9
    fcfs = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="fcfs")
    assert found.outcome.feasible
    assert found.outcome.finished == len(pending)
    assert found.outcome.makespan <= fcfs.outcome.makespan * 1.05 + 1e-9
    # no job later than under today's fair rule, beyond the slack
    for job, end in found.outcome.job_finish.items():
        assert end <= FAIR_SLACK * fcfs.outcome.job_finish[job] + 1e-6
    # every trial placed once
    placed = sorted(t for launch in found.plan for t in launch.trials)
    assert placed == sorted(p.trial for p in pending)
    # fused groups keep to one job and structure, within the job's limit
    by_trial = {p.trial: p for p in pending}
    for launch in found.plan:
        members = [by_trial[t] for t in launch.trials]
        assert len({(p.job, p.structure) for p in members}) == 1
        assert len(members) <= jobs[members[0].job].max_group


def test_the_search_fuses_where_the_profile_pays_and_beats_today_s_rule() -> None:
    cost = CostModel()
    cost.observe("mlp", "s", {}, seconds=10.0)
    cost.observe_profile("mlp", "s", {1: 100.0, 2: 180.0, 4: 320.0, 8: 400.0})
    pending = [Pending(t, 1, "mlp", "s") for t in range(16)]
    jobs = {1: Job(1, cap=2, max_group=8)}
    machines = [Machine("m", cores=2, slots=2)]
    fcfs = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="fcfs")
    assert fcfs.outcome.makespan == pytest.approx(80.0, rel=0.05)  # 16 trials of 10 s, two at a time
    found = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, max_steps=2000, clock=_stopped_clock)
    assert found.outcome.makespan <= fcfs.outcome.makespan / 2.5  # groups of 8: 20 s each, two at a time
    assert max(len(launch.trials) for launch in found.plan) > 1


def test_the_search_stops_at_its_first_look_at_the_clock_past_its_time_bound() -> None:
    """The bound is checked before each plan is weighed: on a clock that moves one second per look, a
    bound of B seconds weighs B - 1 plans after the three baselines, never one more (on a real clock the
    search then ends within one plan of its bound)."""
    pending, jobs, machines, cost = _workload(3)
    for budget in (10.0, 50.0):
        choice = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, budget_s=budget, clock=_ticking(1.0))
        assert choice.steps == 3 + int(budget) - 1
    # max_steps bounds it too, whichever comes first
    choice = choose_plan(
        pending, machines=machines, jobs=jobs, cost=cost, budget_s=50.0, max_steps=20, clock=_ticking(1.0)
    )
    assert choice.steps == 20


def test_without_measurements_the_baseline_is_used_and_says_why() -> None:
    pending = [Pending(0, 1, "new", "s"), Pending(1, 2, "newer", "s")]
    jobs = {1: Job(1, cap=1), 2: Job(2, cap=1)}
    choice = choose_plan(pending, machines=[Machine("m", cores=2, slots=2)], jobs=jobs, cost=CostModel())
    assert choice.start == "fcfs" and choice.outcome is None and choice.steps == 0
    assert choice.fallback == "no trial of new, newer measured yet"
    assert [launch.trials for launch in choice.plan] == [(0,), (1,)]


def test_an_unmeasured_kind_is_taken_to_last_the_median_of_the_measured_ones_alone() -> None:
    cost = CostModel()
    cost.observe("short", "s", {}, seconds=4.0)
    cost.observe("long", "s", {}, seconds=20.0)
    cost.observe_profile("long", "s", {1: 100.0, 4: 400.0})
    pending = [Pending(0, 1, "short", "s"), Pending(1, 1, "long", "s"), Pending(2, 1, "long", "s")]
    pending += [Pending(3 + k, 2, "new", "s") for k in range(4)]
    jobs = {1: Job(1, cap=4, max_group=4), 2: Job(2, cap=4, max_group=4)}
    choice = choose_plan(pending, machines=[Machine("m", cores=1, slots=1)], jobs=jobs, cost=cost, method="fcfs")
    assert choice.guessed == ("new",) and choice.fallback is None
    assert choice.outcome.makespan == pytest.approx(4 + 20 + 20 + 4 * 20, rel=0.05)  # the median: 20 s
    found = choose_plan(
        pending, machines=[Machine("m", cores=1, slots=1)], jobs=jobs, cost=cost, max_steps=800, clock=_stopped_clock
    )
    assert all(len(launch.trials) == 1 for launch in found.plan if launch.trials[0] >= 3)  # no group is guessed to pay


def test_a_baseline_can_be_chosen_instead_of_the_search() -> None:
    pending, jobs, machines, cost = _workload(2)
    choice = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="shortest_first")
    assert (choice.method, choice.start, choice.steps) == ("shortest_first", "shortest_first", 1)
    by_trial = {p.trial: p for p in pending}
    estimate = estimator(cost, by_trial, machines)
    seconds = [estimate(launch).seconds for launch in choice.plan]
    assert seconds == sorted(seconds)
    with pytest.raises(ValueError, match="unknown placement method 'best'"):
        choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="best")


def test_gpu_jobs_get_devices_and_pack_by_memory() -> None:
    cost = CostModel()
    cost.observe("cnn", "s", {}, seconds=10.0, devices=1, memory=30.0)
    pending = [Pending(t, 1, "cnn", "s") for t in range(6)]
    jobs = {1: Job(1, cap=6, gpus=1)}
    machines = [Machine("g", cores=8, slots=1, gpus=1, memory=100.0)]
    fcfs = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="fcfs")
    assert all(launch.devices == 1 for launch in fcfs.plan)
    assert fcfs.outcome.makespan == pytest.approx(60.0, rel=0.05)  # one trial per slot: one at a time
    found = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, max_steps=1500, clock=_stopped_clock)
    # three of 30 bytes fit the device's 100 at once, with a thread each
    assert found.outcome.makespan == pytest.approx(20.0, rel=0.05)


def test_without_a_profile_the_search_fuses_nothing() -> None:
    """A group of K without a measured profile takes K trials' time: fusing gains nothing, so no plan does it."""
    cost = CostModel()
    cost.observe("cnn", "s", {}, seconds=10.0)
    pending = [Pending(t, 1, "cnn", "s") for t in range(8)]
    jobs = {1: Job(1, cap=2, max_group=8)}
    found = choose_plan(
        pending, machines=[Machine("m", cores=2, slots=2)], jobs=jobs, cost=cost, max_steps=500, clock=_stopped_clock
    )
    assert all(len(launch.trials) == 1 for launch in found.plan)
    assert found.outcome.makespan == pytest.approx(40.0, rel=0.05)


def test_a_job_of_short_trials_does_not_wait_behind_a_job_of_long_ones() -> None:
    """Planned again at every free slot over a window of trials, a plan judged by its makespan alone put
    the longest trials first every time: the short job's trials waited to the very end."""
    cost = CostModel()
    for epochs in (1, 2):
        cost.observe("long", "s", {"epochs": epochs}, seconds=10.0 * epochs)
        cost.observe("short", "s", {"epochs": epochs}, seconds=0.3 * epochs)
    pending = [Pending(n, 1, "long", "s", {"epochs": 1}) for n in range(4)]
    pending += [Pending(4 + n, 2, "short", "s", {"epochs": 1}) for n in range(4)]
    jobs = {1: Job(1, cap=2), 2: Job(2, cap=2)}
    machines = [Machine("m", cores=2, slots=2)]
    found = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, max_steps=400, clock=_stopped_clock)
    fcfs = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method="fcfs")
    assert found.outcome.makespan <= fcfs.outcome.makespan + 1e-9
    assert found.outcome.job_finish[2] < 1.0  # the short trials first, on both slots
    assert found.outcome.completion < fcfs.outcome.completion
    assert found.outcome.job_finish[1] <= FAIR_SLACK * fcfs.outcome.job_finish[1]
