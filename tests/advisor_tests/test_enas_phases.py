"""The ENAS phase planner: the cycle, the final phases, budgets and policies."""

from __future__ import annotations

from collections import Counter

import pytest

from baobab.advisor import EnasPhase, EnasPlanner, EnasProgress, EnasStep, phase_policies, trial_policies
from baobab.exceptions import StrategyError
from baobab.model import ArchKnob, PolicyKnob

TS, EV, FE, FT = EnasPhase.TRAIN_SHARED, EnasPhase.EVALUATE, EnasPhase.FINAL_EVALUATE, EnasPhase.FINAL_TRAIN
ALL_POLICIES = {
    "arch": ArchKnob([["a", "b"]] * 3),
    **{
        name.lower(): PolicyKnob(name)
        for name in ("EARLY_STOP", "SHARE_PARAMS", "SKIP_TRAIN", "QUICK_EVAL", "DOWNSCALE")
    },
}


def progress(started: dict, finished: dict | None = None, **kwargs) -> EnasProgress:
    return EnasProgress(started=started, finished=started if finished is None else finished, **kwargs)


def run_sequentially(planner: EnasPlanner) -> list[EnasPhase]:
    """The phases of a search whose trials finish one by one, before the next starts."""
    counts: Counter[EnasPhase] = Counter()
    phases = []
    while True:
        step = planner.next(progress(dict(counts)))
        if step.done:
            return phases
        assert step.phase is not None
        phases.append(step.phase)
        counts[step.phase] += 1


def test_policies_per_phase() -> None:
    on = {phase: {p for p, value in phase_policies(phase).items() if value} for phase in EnasPhase}
    assert on == {
        TS: {"SHARE_PARAMS", "DOWNSCALE", "EARLY_STOP"},
        EV: {"SHARE_PARAMS", "DOWNSCALE", "SKIP_TRAIN", "QUICK_EVAL"},
        FE: {"SHARE_PARAMS", "DOWNSCALE", "SKIP_TRAIN"},
        FT: set(),
    }
    assert len(phase_policies(FT)) == 5
    # A template gets the policies it declares only.
    config = {"share": PolicyKnob("SHARE_PARAMS"), "skip": PolicyKnob("SKIP_TRAIN")}
    assert trial_policies(config, EnasStep(EV, "").policies) == {"SHARE_PARAMS": True, "SKIP_TRAIN": True}
    assert EnasStep(None, "wait").policies == {}


def test_a_trial_count_runs_cycles_then_the_final_phases() -> None:
    planner = EnasPlanner(ALL_POLICIES, trial_budget=13, train_trials=1, evaluate_trials=4, top_k=3)
    assert run_sequentially(planner) == [TS, EV, EV, EV, EV, TS, EV, EV, EV, FE, FE, FE, FT]
    two = EnasPlanner(ALL_POLICIES, trial_budget=12, train_trials=2, evaluate_trials=3, top_k=2)
    assert run_sequentially(two) == [TS, TS, EV, EV, EV, TS, TS, EV, EV, FE, FE, FT]


def test_the_first_shared_training_runs_alone() -> None:
    planner = EnasPlanner(ALL_POLICIES, trial_budget=50, workers=3)
    assert planner.next(progress({}, {})).phase is TS
    # Another training from scratch would start from other weights: its update could not add up.
    step = planner.next(progress({TS: 1}, {}))
    assert (step.phase, step.done, step.reason) == (None, False, "waiting for the first shared training")
    assert planner.next(progress({TS: 3}, {TS: 1})).phase is EV
    # Then the ratio, over trials started: 3 trainings want 12 evaluations.
    assert planner.next(progress({TS: 3, EV: 11}, {TS: 3, EV: 5})).phase is EV
    assert planner.next(progress({TS: 3, EV: 12}, {TS: 3, EV: 5})).phase is TS


def test_a_warmup_trains_the_shared_weights_before_the_controller_learns() -> None:
    # 16 search trials (20 less 3 final evaluations and the final training); a quarter of them warm.
    planner = EnasPlanner(
        ALL_POLICIES, trial_budget=20, train_trials=1, evaluate_trials=4, top_k=3, warmup_fraction=0.25
    )
    assert run_sequentially(planner) == [TS] * 4 + [EV] * 4 + [TS] + [EV] * 4 + [TS] + [EV] * 2 + [FE] * 3 + [FT]
    assert planner.next(progress({TS: 2})).reason == "warming the shared weights: training 3 of 4"
    # Under a time budget: the trainings that fit in a quarter of it, on every worker, at their median.
    timed = EnasPlanner(ALL_POLICIES, time_budget_s=100, workers=2, warmup_fraction=0.25)
    assert timed.warmup_trials(progress({TS: 1}, durations={TS: [5.0]})) == 10
    both = EnasPlanner(ALL_POLICIES, trial_budget=20, time_budget_s=100, workers=2, warmup_fraction=0.25)
    assert both.warmup_trials(progress({TS: 1}, durations={TS: [5.0]})) == 4  # the fewer
    assert EnasPlanner(ALL_POLICIES, trial_budget=20).warmup_trials(progress({})) == 0


def test_the_final_evaluations_wait_for_the_shared_trainings() -> None:
    planner = EnasPlanner(ALL_POLICIES, trial_budget=13, top_k=3)
    step = planner.next(progress({TS: 2, EV: 7}, {TS: 1, EV: 7}))  # the trials left are the final ones
    assert (step.phase, step.reason) == (None, "waiting for 1 shared trainings before the final evaluations")
    assert planner.next(progress({TS: 2, EV: 7})).phase is FE


def test_the_final_training_waits_for_the_final_evaluations() -> None:
    planner = EnasPlanner(ALL_POLICIES, trial_budget=20, top_k=3)
    step = planner.next(progress({TS: 4, EV: 12, FE: 3}, {TS: 4, EV: 12, FE: 2}))
    assert (step.phase, step.done) == (None, False)
    assert step.reason == "waiting for 1 final evaluations before the final training"
    assert planner.next(progress({TS: 4, EV: 12, FE: 3})).phase is FT
    done = planner.next(progress({TS: 4, EV: 12, FE: 3, FT: 1}, {TS: 4, EV: 12, FE: 3}))
    assert (done.phase, done.done) == (None, True)
    # Once a final evaluation started, the search does not go back to the cycle.
    assert planner.next(progress({TS: 1, EV: 1, FE: 1})).phase is FE


def test_a_time_budget_keeps_room_for_the_final_phases() -> None:
    planner = EnasPlanner(ALL_POLICIES, time_budget_s=1000.0, workers=2, top_k=3)
    durations = {EV: [5.0, 10.0, 30.0], TS: [20.0, 30.0, 40.0]}
    counts = {TS: 3, EV: 3}
    # ceil(3 / 2) = 2 rounds of final evaluations at 3 x 10 s, and a final training at 8 x 30 s: 300 s,
    # more than the 20 % of the budget (200 s).
    assert planner.final_reserve_s(progress(counts, durations=durations)) == 300.0
    assert planner.next(progress(counts, durations=durations, elapsed_s=699.0)).phase in (TS, EV)
    assert planner.next(progress(counts, durations=durations, elapsed_s=700.0)).phase is FE
    # Without durations yet, the fraction alone: the final phases start at 800 s.
    assert planner.final_reserve_s(progress({TS: 1})) == 200.0
    assert planner.next(progress({TS: 1}, elapsed_s=799.0)).phase is EV
    assert planner.next(progress({TS: 1}, elapsed_s=800.0)).phase is FE


def test_both_budgets_whichever_comes_first() -> None:
    planner = EnasPlanner(ALL_POLICIES, trial_budget=100, time_budget_s=100.0)
    assert planner.next(progress({TS: 1, EV: 1}, elapsed_s=85.0)).phase is FE
    assert planner.next(progress({TS: 20, EV: 76}, elapsed_s=1.0)).phase is FE
    assert planner.next(progress({TS: 20, EV: 75}, elapsed_s=1.0)).phase is EV


def test_the_template_must_share_and_skip_training() -> None:
    with pytest.raises(StrategyError, match=r"supports SKIP_TRAIN: declare PolicyKnob\('SKIP_TRAIN'\)"):
        EnasPlanner({"arch": ArchKnob([["a"]]), "share": PolicyKnob("SHARE_PARAMS")}, trial_budget=10)
    with pytest.raises(StrategyError, match=r"supports SHARE_PARAMS and SKIP_TRAIN"):
        EnasPlanner({"arch": ArchKnob([["a"]])}, trial_budget=10)
    # The other policies only make trials cheaper.
    EnasPlanner({"share": PolicyKnob("SHARE_PARAMS"), "skip": PolicyKnob("SKIP_TRAIN")}, trial_budget=10)


def test_budgets_and_options_are_checked() -> None:
    with pytest.raises(
        StrategyError, match=r"MODEL_TRIAL_COUNT=8 is too small for an ENAS search: it needs at least 9"
    ):
        EnasPlanner(ALL_POLICIES, trial_budget=8)
    for options, message in [
        ({"workers": 0}, "enas planner option workers=0 must be a whole number >= 1"),
        ({"top_k": 0}, "enas planner option top_k=0 must be a whole number >= 1"),
        ({"evaluate_trials": 1.5}, "enas planner option evaluate_trials=1.5 must be a whole number >= 1"),
        ({"final_fraction": 1.0}, r"enas planner option final_fraction=1.0 must be in \[0, 1\)"),
        ({"final_train_factor": -1}, "enas planner option final_train_factor=-1 must be a number >= 0"),
        ({"time_budget_s": 0}, "enas planner option time_budget_s=0 must be a number > 0"),
        ({"warmup_fraction": 1}, r"enas planner option warmup_fraction=1 must be a number in \[0, 1\)"),
    ]:
        with pytest.raises(StrategyError, match=message):
            EnasPlanner(ALL_POLICIES, **options)
