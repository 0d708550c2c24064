"""The placement planner as the job driver asks it, on the driver's own bookkeeping objects."""

from __future__ import annotations

import pytest

from baobab.advisor._job_options import parse_job_options
from baobab.advisor._scheduling import ActiveTrial, JobState, SubJobState, record_finished
from baobab.advisor.placement import MOST_PER_SUB_JOB, SPARE_JOBS, Planner, fair_shares
from baobab.store import TrialState

NOW = 1_000_000.0


def _job(
    job_id: int,
    *,
    cap: int = 2,
    count: int = 20,
    fusion: object = "off",
    created_at: float = 0.0,
    early_stopping: object = "none",
) -> JobState:
    sub = SubJobState(
        id=job_id * 10,
        job_id=job_id,
        model_name=f"m{job_id}",
        strategy_name="random",
        seed=1,
        knob_config={},
        trial_count=count,
        max_errors=3,
        options=parse_job_options({"fusion": fusion, "early_stopping": early_stopping}, trial_count=count),
    )
    return JobState(id=job_id, created_at=created_at, cap=cap, sub_jobs={sub.id: sub})


def _completed(job: JobState, seconds: float, *, epochs: int = 2, group: int = 1) -> None:
    """A trial of the job's sub-job completed after ``seconds``, as the driver accounts for it."""
    (sub,) = job.sub_jobs.values()
    trial = ActiveTrial(sub.trials + 1000, sub.trials, {"epochs": epochs}, group_size=group)
    sub.trials += 1
    record_finished(job, sub, trial, TrialState.COMPLETED, score=0.5, duration=seconds)


def test_without_a_completed_trial_anywhere_the_planner_leaves_the_choice_to_the_rules() -> None:
    first, fresh = _job(1), _job(2)
    planner = Planner("search")
    assert planner.decide([first, fresh], NOW, free=2) == []
    assert planner.outlooks[1].fallback == (
        "no completed trial of m1 (sub-job 10), m2 (sub-job 20) yet: the fixed rules place the trials"
    )
    _completed(first, 10.0)  # the fresh job's trials are now taken to last the median of the others'
    assert planner.decide([first, fresh], NOW, free=2)
    assert planner.last is not None and planner.last.guessed == ("sub-job 20",)
    assert planner.outlooks[2].fallback == (
        "no completed trial of m2 (sub-job 20) yet: its trials are taken to last the median of the others'"
    )
    assert planner.outlooks[1].fallback is None and planner.outlooks[1].finish_in_s is not None


def test_nobody_wanting_a_slot_or_no_slot_free_is_no_decision() -> None:
    full = _job(1, cap=1)
    _completed(full, 10.0)
    (sub,) = full.sub_jobs.values()
    sub.active[99] = ActiveTrial(99, 99, {})
    planner = Planner("search")
    assert planner.decide([full], NOW, free=1) == []  # at its cap
    other = _job(2)
    _completed(other, 10.0)
    assert planner.decide([full, other], NOW, free=0) == []
    (decision,) = planner.decide([full, other], NOW, free=1)
    assert decision.job is other and decision.size is None  # its fusion option ("off") sizes its units


def test_the_plan_fuses_where_the_measured_profile_pays() -> None:
    job = _job(1, fusion="auto")
    (sub,) = job.sub_jobs.values()
    sub.profiles["{}"] = (8, {1: 100.0, 2: 190.0, 4: 350.0, 8: 600.0})
    _completed(job, 10.0)
    decisions = Planner("search").decide([job], NOW, free=2)
    assert decisions and decisions[0].size > 1
    baseline = Planner("fcfs").decide([job], NOW, free=2)
    assert [d.size for d in baseline] == [1, 1]  # today's rule: one trial per slot, both slots at once
    off = _job(2, fusion="off")
    off.sub_jobs[20].profiles["{}"] = sub.profiles["{}"]
    _completed(off, 10.0)
    assert [d.size for d in Planner("search").decide([off], NOW, free=2)] == [None, None]  # the option's: alone
    fixed = _job(3, fusion={"max_group": 3})  # the option's K, though no profile says that fusing pays
    _completed(fixed, 10.0)
    assert [d.size for d in Planner("search").decide([fixed], NOW, free=2)] == [None, None]


def test_fused_trials_teach_the_cost_of_one_alone() -> None:
    job = _job(1, fusion={"max_group": 4})
    (sub,) = job.sub_jobs.values()
    sub.profiles["{}"] = (4, {1: 100.0, 4: 100.0})  # a group of 4 trains no faster than one
    _completed(job, 40.0, group=4)
    planner = Planner("fcfs")
    planner.decide([job], NOW, free=1)
    estimate = planner.cost.estimate("sub-job 10", "", {"epochs": 2})
    assert estimate is not None and abs(estimate.seconds - 10.0) < 1.0
    assert planner.last is not None and planner.last.method == "fcfs"


def test_a_sub_job_past_its_trial_count_that_still_wants_a_step_is_forecast_one_trial() -> None:
    """A plan's last step (a final retraining) can come after the trial count: it still gets a slot."""
    job = _job(1, count=1)
    _completed(job, 10.0)
    (sub,) = job.sub_jobs.values()
    sub.trial_count = 1  # spent; the sub-job wants a slot all the same, as a plan's final step would
    planner = Planner("search")
    pending, owners = planner._forecast([(job, 2, [sub])])
    assert len(pending) == 1 and owners[0] == (job, sub)


def test_under_asha_the_forecast_trials_run_their_expected_share() -> None:
    plain, asha = _job(1), _job(2, early_stopping={"rule": "asha", "eta": 3})
    for job in (plain, asha):
        _completed(job, 10.0, epochs=10)
    planner = Planner("fcfs")
    pending, _ = planner._forecast([(plain, 2, list(plain.sub_jobs.values())), (asha, 2, list(asha.sub_jobs.values()))])
    shares = {p.job: p.fraction for p in pending}
    assert shares[1] == 1.0
    assert shares[2] == pytest.approx((2 + 2 / 3 + 6 / 9) / 10)  # steps 0-1 all, 2-3 a third, 4-9 a ninth


def test_fair_shares_split_the_slots_a_unit_at_a_time_to_the_job_with_the_fewest() -> None:
    old, new, done = _job(1, created_at=1.0), _job(2, created_at=2.0), _job(3, created_at=3.0)
    demands = {old: 10, new: 10, done: 1}  # done wants no more: its demand is what it runs
    assert fair_shares(demands, 5) == {1: 2, 2: 2, 3: 1}
    assert fair_shares(demands, 6) == {1: 3, 2: 2, 3: 1}  # the oldest gets what does not split evenly
    assert fair_shares(demands, 100) == {1: 10, 2: 10, 3: 1}  # no job is given more than it asks


def test_the_plan_keeps_each_job_within_its_fair_share_however_short_the_others_trials() -> None:
    """A slot frees from the job of short trials while the job of long ones runs below its share: the
    long job gets it, as under the fixed rules, though starting the short ones first would end more
    trials sooner."""
    long, short = _job(1, created_at=1.0), _job(2, created_at=2.0)
    _completed(long, 100.0)
    _completed(short, 1.0)
    (long_sub,) = long.sub_jobs.values()
    (short_sub,) = short.sub_jobs.values()
    long_sub.active[90] = ActiveTrial(90, 90, {})
    short_sub.active.update({91: ActiveTrial(91, 91, {}), 92: ActiveTrial(92, 92, {})})
    long.cap = short.cap = 4
    (decision,) = Planner("search").decide([long, short], NOW, free=1, slots=4)
    assert decision.job is long
    long_sub.trial_count = long_sub.trials  # it wants no more: its share is open to the other job
    (decision,) = Planner("search").decide([long, short], NOW, free=1, slots=4)
    assert decision.job is short


def test_a_decision_weighs_the_jobs_the_fair_rule_would_serve_next_and_no_more() -> None:
    jobs = [_job(n, cap=10, count=1000, created_at=float(n)) for n in range(1, 101)]
    for job in jobs:
        _completed(job, 60.0)
    planner = Planner("search")
    (decision,) = planner.decide(jobs, NOW, free=1, slots=1000)
    assert sorted(planner.outlooks) == list(range(1, 2 + SPARE_JOBS))  # the oldest, as none runs anything
    assert decision.job is jobs[0]
    assert planner.last is not None
    assert sum(len(launch.trials) for launch in planner.last.plan) == (1 + SPARE_JOBS) * MOST_PER_SUB_JOB


@pytest.mark.parametrize(
    ("slots", "seconds", "free", "bound"),
    [
        (2, 1.0, 1, 0.01),  # a hundredth of the slot-second it places
        (1000, 60.0, 1, 0.0012),  # a fiftieth of the driver's time between decisions
        (2, 600.0, 2, 0.05),  # never more than the planner's own bound
    ],
)
def test_a_decisions_time_bound_is_a_small_share_of_the_work_it_places(
    slots: int, seconds: float, free: int, bound: float
) -> None:
    job = _job(1, cap=slots, count=1000)
    _completed(job, seconds)
    (sub,) = job.sub_jobs.values()
    assert Planner("search")._budget([(job, slots, [sub])], free, slots) == pytest.approx(bound)


def test_where_every_plan_starts_the_same_units_no_search_is_paid_for() -> None:
    alone = _job(1, cap=4, count=100)
    _completed(alone, 30.0)
    planner = Planner("search")
    (decision,) = planner.decide([alone], NOW, free=1, slots=4)
    assert decision.job is alone
    assert planner.last is not None and (planner.last.method, planner.last.steps) == ("fcfs", 1)
    assert planner.outlooks[1].finish_in_s is not None  # the outlook is still played
    other = _job(2, cap=4, count=100)
    _completed(other, 30.0)
    planner.decide([alone, other], NOW, free=1, slots=4)  # two jobs, one slot: the plan orders them
    assert planner.last is not None and planner.last.method == "search" and planner.last.steps > 1
