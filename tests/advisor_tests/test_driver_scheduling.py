"""The job driver's pure rules (who gets a slot, when jobs end and how) and the trial knob values.

These run on plain objects, with no store and no clock; ``test_driver.py`` runs the same
rules through a real driver.
"""

from __future__ import annotations

import json
import math

import pytest

from baobab.advisor import TrialStatus, base_knobs, trial_knobs, trial_policies
from baobab.advisor._durations import DURATIONS_KEPT, RecentDurations
from baobab.advisor._job_options import AUTO_MAX_GROUP, parse_job_options
from baobab.advisor._packing import packed_size
from baobab.advisor._plans import PlanStep, RetrainPhase, options_plan
from baobab.advisor._scheduling import (
    BEST_KEPT,
    MIN_PROFILE_S,
    PROFILE_SHARE,
    ActiveTrial,
    JobState,
    StopCause,
    SubJobState,
    first_line,
    pick_next,
    record_finished,
    record_for,
)
from baobab.exceptions import KnobConfigError
from baobab.model import CategoricalKnob, FixedKnob, FloatKnob, IntegerKnob, Policy, PolicyKnob, structural_knobs
from baobab.store import JobStatus, TrialState

NOW = 1_000_000.0


def sub(sub_id: int, *, running: int = 0, trials: int = 0, count: int | None = 10, **fields: object) -> SubJobState:
    state = SubJobState(
        id=sub_id,
        job_id=0,
        model_name=f"m{sub_id}",
        strategy_name="random",
        seed=1,
        knob_config={},
        trial_count=count,
        max_errors=3,
        trials=trials + running,
        **fields,  # type: ignore[arg-type]
    )
    for i in range(running):
        trial_id = sub_id * 1000 + i
        state.active[trial_id] = ActiveTrial(trial_id, i, {})
    return state


def job(job_id: int, *subs: SubJobState, cap: int = 4, created_at: float = 0.0, **fields: object) -> JobState:
    return JobState(id=job_id, created_at=created_at, cap=cap, sub_jobs={s.id: s for s in subs}, **fields)  # type: ignore[arg-type]


def picked(*jobs: JobState) -> tuple[int, int] | None:
    choice = pick_next(jobs, NOW)
    return None if choice is None else (choice[0].id, choice[1].id)


# -- who gets the next slot ------------------------------------------------------------------------


def test_the_job_with_the_fewest_running_trials_gets_the_slot() -> None:
    assert picked(job(1, sub(11, running=2), created_at=1), job(2, sub(21, running=1), created_at=2)) == (2, 21)


def test_ties_go_to_the_oldest_job_then_the_lowest_id() -> None:
    assert picked(job(2, sub(21), created_at=5), job(1, sub(11), created_at=9)) == (2, 21)
    assert picked(job(2, sub(21), created_at=5), job(1, sub(11), created_at=5)) == (1, 11)


def test_jobs_at_their_cap_stopping_or_near_their_deadline_get_none() -> None:
    full = job(1, sub(11, running=2), cap=2)
    stopping = job(2, sub(21), stop_cause=StopCause.USER)
    # median 6 s: would end too late
    late = job(3, sub(31), deadline=NOW + 5, durations=RecentDurations([4.0, 6.0, 9.0]))
    assert picked(full, stopping, late) is None
    in_time = job(4, sub(41), deadline=NOW + 7, durations=RecentDurations([4.0, 6.0, 9.0]))
    assert picked(full, stopping, late, in_time) == (4, 41)


def test_within_a_job_the_sub_job_with_the_fewest_running_then_fewest_trials() -> None:
    subs = sub(11, running=2), sub(12, running=1, trials=8), sub(13, running=1, trials=3)
    assert picked(job(1, *subs, cap=8)) == (1, 13)
    assert picked(job(1, sub(12, trials=4), sub(11, trials=4))) == (1, 11)


def test_sub_jobs_that_want_no_trial_are_passed_over() -> None:
    spent = sub(11, trials=5, count=5)
    failed = sub(12, failure="strategy 'x' failed")
    ended = sub(13, status=JobStatus.COMPLETED)
    assert picked(job(1, spent, failed, ended)) is None
    assert picked(job(1, spent, failed, ended), job(2, sub(21, running=3))) == (2, 21)
    assert picked(job(1, sub(11, trials=10_000, count=None))) == (1, 11)  # a TIME_HOURS-only budget


def test_a_fused_group_takes_one_slot() -> None:
    grouped = sub(11)
    for i in range(3):
        grouped.active[100 + i] = ActiveTrial(100 + i, i, {}, group=100)
    assert job(1, grouped).running == 3 and job(1, grouped).units == 1
    # Job 1 runs one unit (a group of three), job 2 two trials alone: job 1 gets the slot.
    assert picked(job(1, grouped, created_at=2), job(2, sub(21, running=2), created_at=1)) == (1, 11)
    assert picked(job(1, grouped, cap=1)) is None  # its one slot is taken by the group


# -- fused groups ------------------------------------------------------------------------------------


def fusing(fusion: object, *, count: int | None = 10, trials: int = 0, policies: dict | None = None) -> SubJobState:
    options = parse_job_options({"fusion": fusion, "policies": policies or {}}, trial_count=count)
    state = sub(11, count=count, trials=trials, options=options)
    state.plan = options_plan(options, frozenset({Policy.EARLY_STOP}))
    return state


def test_groups_form_only_under_max_group_and_within_the_trial_count() -> None:
    owner = job(1)
    plain = PlanStep(None, {Policy.SHARE_PARAMS: False})

    def size(state: SubJobState, step: PlanStep = plain, structure: str = "{}") -> int:
        return state.group_size(owner, step, NOW, state.fusion_size(structure, owner))

    assert size(fusing({"max_group": 4})) == 4
    assert size(fusing({"max_group": 4}, trials=8)) == 2  # 2 trials left of 10
    assert size(fusing("off")) == 1
    assert size(fusing("auto")) == 1  # no profile says fusing pays: unfused
    final = PlanStep(RetrainPhase.FINAL, {}, proposal={"lr": 0.1}, final=True)
    assert size(fusing({"max_group": 4}), final) == 1  # a retrained best configuration
    assert size(fusing({"max_group": 4}), PlanStep("train_shared", {})) == 1  # a strategy's phase


def test_under_auto_a_structure_is_measured_once_and_its_groups_take_the_measured_size() -> None:
    owner, plain = job(1, cap=1), PlanStep(None, {Policy.SHARE_PARAMS: False})
    a, b = '{"width": 8}', '{"width": 16}'  # structure keys
    state = fusing("auto", count=40)
    assert not state.wants_profile(plain, a)  # no trial finished: no time to take a share of
    state.add_finished(ActiveTrial(99, 0, {}), TrialState.COMPLETED, 0.5, 100.0, None)
    assert state.wants_profile(plain, a) and state.fusion_size(a, owner) == 1
    measuring = ActiveTrial(100, 0, {}, profiling=a)
    state.active[100] = measuring
    assert not state.wants_profile(plain, a)  # being measured: nobody else measures it
    assert not state.wants_profile(plain, b)  # another structure waits: one measurement at a time
    final = PlanStep(RetrainPhase.FINAL, {}, proposal={"lr": 0.1}, final=True)
    assert not state.wants_profile(final, b)  # a final trial never runs fused: nothing to measure
    del state.active[100]
    assert state.wants_profile(plain, b)
    rates = {"1": 900.0, "2": 800.0, "4": 1500.0, "16": 2000.0}
    profile = {"max_group": 64, "samples_per_s": rates, "best": 16, "seconds": 2.0, "reason": None}
    state.add_finished(measuring, TrialState.COMPLETED, 0.5, 3.0, None, profile)
    assert state.profiles == {a: (16, {1: 900.0, 2: 800.0, 4: 1500.0, 16: 2000.0})}
    assert not state.wants_profile(plain, a)
    assert state.fusion_size(a, owner) == 16 and state.fusion_size(b, owner) == 16  # b borrows a's till measured
    state.trials = 32  # 8 trials left, one slot: a group of 8 (the count cuts 16)
    assert state.group_size(owner, plain, NOW, state.fusion_size(a, owner)) == 8
    # A trial that ended before measuring (its row keeps the bare request) leaves the structure to another.
    state.add_finished(ActiveTrial(101, 1, {}, profiling=b), TrialState.ERRORED, None, 1.0, None, {"max_group": 64})
    assert b not in state.profiles and state.wants_profile(plain, b)
    assert not fusing("off").wants_profile(plain, a) and not fusing({"max_group": 4}).wants_profile(plain, a)


def test_profiles_are_asked_for_no_larger_group_than_is_left_and_within_a_share_of_the_time_trials_ran() -> None:
    plain, wide = PlanStep(None, {Policy.SHARE_PARAMS: False}), '{"width": 16}'
    state = fusing("auto", count=40)
    # No trial has finished: nothing to take a share of.
    assert state.profile_budget() == 0 and not state.wants_profile(plain, wide)
    assert state.profile_gate()[0] == "wait"
    assert state.profile_request() == {"max_group": 40, "budget_s": 0}
    state.add_finished(ActiveTrial(100, 0, {"lr": 0.2}), TrialState.COMPLETED, 0.6, 20.0, None)
    state.trials = 2
    assert state.profile_budget() == pytest.approx(PROFILE_SHARE * 20.0)
    assert state.profile_budget() < MIN_PROFILE_S  # 0.6 s: too little
    assert not state.wants_profile(plain, wide) and state.profile_gate()[0] == "wait"
    # A fused group of 4 that ran 160 s took one slot 160 s: 40 slot-seconds each.
    for i in range(4):
        state.add_finished(ActiveTrial(101 + i, 1, {}, group=101, group_size=4), TrialState.COMPLETED, 0.5, 160.0, None)
    assert state.trial_s == pytest.approx(180.0)
    # Groups of up to the 38 trials left, within 3% of the 180 s the trials ran
    assert state.profile_request() == {"max_group": 38, "budget_s": pytest.approx(PROFILE_SHARE * 180.0)}
    assert state.wants_profile(plain, wide) and state.profile_gate()[0] == "profile"
    done = ActiveTrial(105, 2, {"lr": 0.1}, profiling='{"width": 8}')
    measured = {"max_group": 38, "samples_per_s": {"1": 900.0, "2": 1900.0}, "best": 2, "seconds": 5.0, "reason": None}
    state.add_finished(done, TrialState.COMPLETED, 0.5, 9.5, None, measured)
    # The planner learns the trial's training, without its 5 s of measuring; the budget, what is left.
    assert [seconds for _, seconds, _ in state.timings][-1] == pytest.approx(4.5)
    assert state.profile_budget() == pytest.approx(PROFILE_SHARE * 189.5 - 5.0)
    assert state.profile_budget() < MIN_PROFILE_S and not state.wants_profile(plain, wide)  # spent: borrowed
    assert fusing("auto", count=None).profile_request()["max_group"] == AUTO_MAX_GROUP
    state = fusing("auto", count=40)
    state.add_finished(ActiveTrial(100, 0, {}), TrialState.COMPLETED, 0.6, 200.0, None)
    state.trials = 39
    assert not state.wants_profile(plain, wide)  # the last trial: no group could use its measurement


def test_an_unmeasured_structure_borrows_the_size_of_the_nearest_measured_one() -> None:
    owner = job(1, cap=1)
    state = fusing("auto", count=None)

    def measured(structure: dict, best: int) -> None:
        trial = ActiveTrial(len(state.profiles), 0, {}, profiling=json.dumps(structure, sort_keys=True))
        rates = {"1": 100.0, str(best): 300.0}
        profile = {"max_group": 64, "samples_per_s": rates, "best": best, "seconds": 1.0, "reason": None}
        state.add_finished(trial, TrialState.COMPLETED, 0.5, 100.0, None, profile)

    measured({"width": 32, "act": "relu"}, 16)
    measured({"width": 256, "act": "relu"}, 1)
    measured({"width": 32, "act": "tanh"}, 4)
    key = lambda **knobs: json.dumps(knobs, sort_keys=True)  # noqa: E731
    assert state.fusion_size(key(width=64, act="relu"), owner) == 16  # nearer 32 than 256
    assert state.fusion_size(key(width=200, act="relu"), owner) == 1  # nearer 256
    assert state.fusion_size(key(width=32, act="gelu"), owner) == 16  # one knob differs from two: ties by name
    assert state.fusion_size(key(width=32, act="tanh"), owner) == 4  # its own
    # Borrowed, but measured all the same: the trial is asked for its own profile.
    assert state.wants_profile(PlanStep(None, {}), key(width=64, act="relu"))


def test_the_last_trials_are_spread_over_the_jobs_slots_where_that_trains_faster() -> None:
    rates = {1: 900.0, 2: 800.0, 4: 1500.0, 16: 2000.0}
    assert packed_size(rates, 16, None, 4) == 16  # no count: groups of the best size
    assert packed_size(rates, 16, 64, 4) == 16  # enough left to fill the slots
    assert packed_size(rates, 16, 16, 4) == 4  # four groups of 4 on four slots: 6,000 rows/s against 2,000
    assert packed_size(rates, 16, 4, 4) == 1  # four alone: 3,600 against one group of 4's 1,500
    assert packed_size(rates, 16, 4, 1) == 16  # one slot: the best size (the count cuts the group)
    assert packed_size({1: 900.0}, 1, 3, 2) == 1
    # 16 trials on 2 slots (bench/results/fusion.md's MLP): two groups of 8. The second is sized
    # with the first's 8 running counted, as fusion_size counts them, so it is 8 again, not 8 alone.
    mlp = {1: 67_000.0, 2: 40_000.0, 4: 64_000.0, 8: 85_600.0, 16: 109_000.0}
    assert packed_size(mlp, 16, 16, 2) == 8
    assert packed_size(mlp, 16, 8, 2) == 1  # what counting only the trials not yet started would say
    # A size is weighed at its measured rate only where the trials fill it: 4 trials are no group of 32.
    assert packed_size({1: 40_000.0, 4: 41_800.0, 32: 89_600.0}, 32, 4, 2) == 1


def test_a_group_of_search_trials_leaves_the_final_trials_to_the_final_phase() -> None:
    state = fusing({"max_group": 8}, trials=5, policies={"EARLY_STOP": True, "final_trials": 2})
    state.started[RetrainPhase.SEARCH] = 5
    step = state.next_step(job(1), NOW)
    assert step == PlanStep(RetrainPhase.SEARCH, {Policy.EARLY_STOP: True})
    assert state.group_size(job(1), step, NOW, 8) == 3  # search trials 6 to 8; 9 and 10 are the final ones
    assert (state.trials, state.started[RetrainPhase.SEARCH]) == (5, 5)  # counting ahead changed nothing


def test_structural_knobs_are_every_knob_but_the_float_ones_and_the_epochs() -> None:
    config = {
        "lr": FloatKnob(1e-3, 1.0),
        "width": IntegerKnob(1, 8),
        "act": CategoricalKnob(["relu", "tanh"]),
        "epochs": FixedKnob(3),
        "short": PolicyKnob("EARLY_STOP"),
    }
    knobs = {"lr": 0.1, "width": 4, "act": "tanh", "epochs": 3, "short": False}
    assert structural_knobs(config, knobs) == {"width": 4, "act": "tanh", "short": False}
    assert structural_knobs(config, {**knobs, "lr": 0.5, "epochs": 9}) == structural_knobs(config, knobs)


# -- time --------------------------------------------------------------------------------------------


def test_median_duration_and_deadline_near() -> None:
    state = job(1, deadline=NOW + 10)
    assert state.durations.median() == 0.0 and not state.deadline_near(NOW)
    for seconds in (9.0, 1.0, 3.0, math.nan, -1.0):
        state.durations.add(seconds)  # NaN and negative durations (clock steps) are left out
    assert list(state.durations) == [1.0, 3.0, 9.0] and state.durations.median() == 3.0
    state.durations.add(5.0)
    assert state.durations.median() == 4.0
    assert not state.deadline_near(NOW + 6.0) and state.deadline_near(NOW + 6.5)
    assert not job(2).deadline_near(NOW + 1e9)  # no TIME_HOURS, no deadline


def test_the_median_is_of_the_latest_run_times_only() -> None:
    durations = RecentDurations(float(s) for s in range(3 * DURATIONS_KEPT))  # 0 to 2999 s, in that order
    assert len(durations) == DURATIONS_KEPT and durations[0] == 2 * DURATIONS_KEPT
    assert durations.median() == 2 * DURATIONS_KEPT + (DURATIONS_KEPT - 1) / 2
    short = RecentDurations([100.0, 100.0, 1.0, 2.0, 3.0], window=3)  # the trials got shorter
    assert list(short) == [1.0, 2.0, 3.0] and short.median() == 2.0


def test_a_sub_job_keeps_its_best_distinct_proposals_only() -> None:
    state = sub(1)
    for number in range(3 * BEST_KEPT):
        trial = ActiveTrial(number, number, {"x": number % (2 * BEST_KEPT)})  # each proposal twice
        state.add_finished(trial, TrialState.COMPLETED, float(number), 1.0, None)
    assert len(state.best) == BEST_KEPT
    # The best first; a proposal seen twice counts once, at its better score (trials 299, 298, 297).
    assert state.best_configs(3) == [{"x": BEST_KEPT - k} for k in (1, 2, 3)]
    final = sub(2, options=parse_job_options({"policies": {"EARLY_STOP": True, "final_trials": 2 * BEST_KEPT}}))
    for number in range(3 * BEST_KEPT):
        final.add_finished(ActiveTrial(number, number, {"x": number}), TrialState.COMPLETED, -float(number), 1.0, None)
    assert final.best_configs(2 * BEST_KEPT) == [{"x": n} for n in range(2 * BEST_KEPT)]  # as many as the final phase


def test_next_timer_is_the_deadline_then_the_grace_end() -> None:
    state = job(1, deadline=NOW + 10)
    assert state.next_timer() == NOW + 10
    state.stop_cause, state.grace_end = StopCause.TIME, NOW + 40
    assert state.next_timer() == NOW + 40
    state.cancelled = True
    assert state.next_timer() is None


# -- endings ----------------------------------------------------------------------------------------


def test_a_sub_job_ends_when_nothing_runs_and_it_starts_nothing_more() -> None:
    running, spent, wanting = sub(11, running=1, count=1), sub(12, trials=1, count=1), sub(13, trials=0)
    state = job(1, running, spent, wanting)
    assert state.ending(NOW) == ([spent], False)
    state.stop_cause = StopCause.USER  # now the one that wanted trials ends too
    assert state.ending(NOW) == ([spent, wanting], False)
    running.active.clear()
    assert state.ending(NOW) == ([running, spent, wanting], True)


@pytest.mark.parametrize(
    ("fields", "cause", "expected"),
    [
        ({"completed": 2, "errored": 5}, None, (JobStatus.COMPLETED, None)),
        ({"completed": 2}, StopCause.USER, (JobStatus.STOPPED, None)),
        ({"completed": 2, "failure": "strategy 'bayes' failed"}, None, (JobStatus.ERRORED, "strategy 'bayes' failed")),
        ({}, StopCause.TIME, (JobStatus.ERRORED, "no trial started before the time budget ended")),
        (
            {"trials": 3, "errored": 2, "cancelled": 1, "last_error": "ValueError: bad"},
            None,
            (JobStatus.ERRORED, "no trial completed (2 errored, 1 cancelled); last error: ValueError: bad"),
        ),
        (
            {"trials": 4, "invalid": 4},
            None,
            (JobStatus.ERRORED, "no trial completed (0 errored, 4 invalid, 0 cancelled)"),
        ),
        ({"trials": 5, "completed": 1, "invalid": 4}, None, (JobStatus.COMPLETED, None)),
    ],
)
def test_sub_job_outcomes(fields: dict, cause: StopCause | None, expected: tuple) -> None:
    state = sub(1)
    for name, value in fields.items():
        setattr(state, name, value)
    assert state.outcome(cause) == expected


def test_a_sub_job_is_broken_after_max_errors_without_a_success() -> None:
    state = sub(1)
    for i in range(3):
        assert not state.broken()
        state.count(TrialState.ERRORED, f"\n  RuntimeError: boom {i}\nTraceback ...")
    assert state.broken() and state.last_error == "RuntimeError: boom 2"
    assert state.broken_message().startswith("its first 3 trials all errored (last error: RuntimeError: boom 2)")
    state.count(TrialState.STOPPED, None)
    assert not state.broken()


def test_invalid_trials_are_counted_apart_and_never_make_a_sub_job_broken() -> None:
    state = sub(1)
    for i in range(10):  # well past max_errors=3: a search space's invalid points are no template fault
        state.count(TrialState.INVALID, f"train() raised InvalidArchitectureError: shape {i}")
    assert not state.broken() and (state.invalid, state.errored, state.last_error) == (10, 0, None)
    state.count(TrialState.ERRORED, "RuntimeError: boom")
    assert not state.broken() and state.errored == 1


def test_job_outcomes() -> None:
    done, failed = sub(1, status=JobStatus.COMPLETED), sub(2, status=JobStatus.ERRORED, error="boom")
    assert job(1, done, failed).outcome() == (JobStatus.COMPLETED, None)
    assert job(1, done, failed, stop_cause=StopCause.USER).outcome() == (JobStatus.STOPPED, None)
    status, error = job(1, failed, sub(3, status=JobStatus.ERRORED, error="bad knobs")).outcome()
    assert status is JobStatus.ERRORED
    assert error == "no model template completed a trial: m2 (sub-job 2): boom; m3 (sub-job 3): bad knobs"
    assert job(1).outcome() == (JobStatus.ERRORED, "the job has no sub-jobs (no model templates)")


def test_records_for_strategies() -> None:
    trial = ActiveTrial(7, 3, {"x": 0.5})
    assert record_for(trial, TrialState.STOPPED, 0.25).status is TrialStatus.COMPLETED
    assert record_for(trial, TrialState.COMPLETED, 0.25).trial_id == 3  # the number the strategy proposed for
    for state, score in [
        (TrialState.COMPLETED, math.nan),
        (TrialState.COMPLETED, None),
        (TrialState.ERRORED, None),
        (TrialState.CANCELLED, None),
    ]:
        record = record_for(trial, state, score)
        assert record.status is TrialStatus.FAILED and record.score is None
    invalid = record_for(ActiveTrial(8, 4, {"x": 0.5}, phase="search"), TrialState.INVALID, None)
    assert (invalid.status, invalid.score, invalid.knobs, invalid.metadata) == (
        TrialStatus.INVALID,
        None,
        {"x": 0.5},
        {"phase": "search"},
    )


def test_first_line() -> None:
    assert first_line("\n\n  ValueError: x  \nmore") == "ValueError: x"
    assert first_line(None) == "" and first_line("a" * 600, 10) == "aaaaaaa..."


# -- knob values of a trial ---------------------------------------------------------------------


def test_trial_knobs_add_fixed_and_policy_knobs() -> None:
    config = {
        "lr": FloatKnob(1e-3, 1.0),
        "act": CategoricalKnob(["relu", "tanh"]),
        "epochs": FixedKnob(3),
        "short": PolicyKnob("EARLY_STOP"),
        "small": PolicyKnob("DOWNSCALE"),
    }
    assert trial_policies(config) == {"EARLY_STOP": False, "DOWNSCALE": False}
    assert trial_policies(config, {"EARLY_STOP": True, "SKIP_TRAIN": True}) == {"EARLY_STOP": True, "DOWNSCALE": False}
    assert base_knobs(config) == {"epochs": 3, "short": False, "small": False}
    assert trial_knobs(config, {"lr": 0.1, "act": "tanh"}, {"DOWNSCALE": True}) == {
        "lr": 0.1,
        "act": "tanh",
        "epochs": 3,
        "short": False,
        "small": True,
    }
    with pytest.raises(KnobConfigError, match="knob 'act': has no value"):
        trial_knobs(config, {"lr": 0.1})
    with pytest.raises(KnobConfigError, match="knob 'lr': 5.0 is outside"):
        trial_knobs(config, {"lr": 5.0, "act": "relu"})


def test_a_fused_member_counts_its_share_of_the_slot_and_groups_fit_the_time_left() -> None:
    owner = job(1, fusing("auto"), deadline=NOW + 100)
    state = owner.sub_jobs[11]
    assert owner.fitting_group(NOW) is None  # nothing finished to judge by
    for i in range(3):  # a group of 4 that ran 40 s: 10 slot-seconds a trial
        record_finished(owner, state, ActiveTrial(i, i, {}, group=0, group_size=4), TrialState.COMPLETED, score=0.5,
                        duration=40.0)  # fmt: skip
    assert owner.durations.median() == 10.0 and not owner.deadline_near(NOW)
    assert owner.fitting_group(NOW) == 10 and owner.fitting_group(NOW + 95) == 1
    plain = PlanStep(None, {Policy.SHARE_PARAMS: False})
    assert state.group_size(owner, plain, NOW + 70, 16) == 3  # 30 s left: 3 trials' worth
    requeued = ActiveTrial(9, 9, {}, group=0, group_size=4)
    requeued.run_alone()
    assert (requeued.group, requeued.group_size, requeued.unit) == (None, 1, 9)


def test_the_trials_that_run_count_toward_the_size_of_the_last_groups() -> None:
    state = fusing("auto", count=40, trials=32)
    owner = job(1, state, cap=2)
    state.profiles["{}"] = (16, {1: 67_000.0, 2: 40_000.0, 4: 64_000.0, 8: 85_600.0, 16: 109_000.0})
    assert state.fusion_size("{}", owner) == 1  # 8 left, none running: alone on both slots
    for i in range(8):  # a group of 8 at work on one slot
        state.active[100 + i] = ActiveTrial(100 + i, 24 + i, {}, group=100, group_size=8)
    assert state.fusion_size("{}", owner) == 8  # the other 8 as a group too: the two end together
