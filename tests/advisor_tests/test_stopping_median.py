"""The median stopping rule, the factory of stopping rules, and the rule that never stops."""

from __future__ import annotations

import pytest

from baobab.advisor import STOPPING_RULES, Action, Finish, MedianRule, NoStopping, Report, make_stopping_rule
from baobab.exceptions import StrategyError

# Completed trials' curves (step 0, 1, 2, 3). Running averages:
#   step 1: A 0.3, B 0.2, C 0.3 -> median 0.3
#   step 2: A 0.4, B 0.3, C 0.3 -> median 0.3
#   step 3: A 0.5, B 0.4, C 0.3 -> median 0.4
CURVES = {
    "A": [0.2, 0.4, 0.6, 0.8],
    "B": [0.1, 0.3, 0.5, 0.7],
    "C": [0.3, 0.3, 0.3, 0.3],
}
IDS = {"A": 0, "B": 1, "C": 2}


def completed_run(rule: MedianRule) -> MedianRule:
    for name, curve in CURVES.items():
        for step, value in enumerate(curve):
            assert rule.report(IDS[name], step, value).action is Action.CONTINUE  # fewer than 3 completed
        rule.finished(IDS[name], curve[-1])
    return rule


def test_median_of_running_averages() -> None:
    rule = completed_run(MedianRule(grace_steps=1, min_trials=3))
    assert [rule.median_at(s) for s in range(4)] == pytest.approx([0.2, 0.3, 0.3, 0.4])


def test_stops_when_the_best_value_so_far_is_below_the_median() -> None:
    rule = completed_run(MedianRule(grace_steps=1, min_trials=3))
    assert rule.report(10, 0, 0.01).action is Action.CONTINUE  # grace period
    assert rule.report(10, 1, 0.29).stop  # best 0.29 < 0.3
    assert rule.report(11, 0, 0.9).action is Action.CONTINUE
    assert rule.report(11, 1, 0.25).action is Action.CONTINUE  # best so far is 0.9
    assert rule.report(12, 1, 0.3).action is Action.CONTINUE  # equal to the median: not below
    assert rule.report(12, 2, 0.29).action is Action.CONTINUE  # best 0.3 >= 0.3
    decision = rule.report(12, 3, 0.35)  # best 0.35 < 0.4
    assert decision.stop
    assert decision.reason == (
        "median: best value 0.35 by step 3 is below the median 0.4 of the running averages of 3 completed trials"
    )


def test_needs_min_trials_completed_up_to_the_step() -> None:
    rule = MedianRule(grace_steps=0, min_trials=3)
    for trial_id in range(2):
        rule.report(trial_id, 0, 0.9)
        rule.finished(trial_id, 0.9)
    decision = rule.report(5, 0, 0.1)
    assert decision.action is Action.CONTINUE and "2 completed trials reach step 0; 3 needed" in decision.reason
    rule.report(2, 3, 0.9)  # a completed trial whose first value is at step 3 does not count at step 0
    rule.finished(2, 0.9)
    assert rule.report(6, 0, 0.1).action is Action.CONTINUE
    assert rule.report(6, 3, 0.1).stop


def test_only_completed_trials_are_references() -> None:
    rule = completed_run(MedianRule(grace_steps=1, min_trials=3))
    rule.report(10, 1, 0.0)
    assert rule.report(10, 2, 0.0).stop
    rule.finished(10, 0.0)  # stopped by the rule: not a reference, though it has a final value
    rule.report(11, 1, 0.35)
    rule.finished(11, None)  # failed: not a reference
    assert rule.median_at(1) == pytest.approx(0.3)
    # A completed trial's curve that ended early still counts, averaged over what it reported.
    rule.report(12, 0, 1.0)
    rule.finished(12, 1.0)
    assert rule.median_at(3) == pytest.approx((0.4 + 0.5) / 2)  # A 0.5, B 0.4, C 0.3, trial 12: 1.0


def test_rebuild_gives_the_same_rule() -> None:
    events: list[Report | Finish] = []
    for name, curve in CURVES.items():
        events += [Report(IDS[name], step, value) for step, value in enumerate(curve)]
        events.append(Finish(IDS[name], curve[-1]))
    events += [Report(10, 0, 0.1), Report(11, 0, 0.5), Report(10, 1, 0.2), Report(11, 1, 0.5)]
    events += [Finish(10, 0.2), Finish(11, 0.6)]
    original = MedianRule(grace_steps=1, min_trials=3)
    original.replay(events)
    assert set(original.stopped) == {10}
    rebuilt = make_stopping_rule("median", grace_steps=1, min_trials=3, history=events)
    assert rebuilt.stopped == original.stopped
    assert [rebuilt.median_at(s) for s in range(4)] == [original.median_at(s) for s in range(4)]
    for step, value in [(1, 0.2), (2, 0.45), (3, 0.44)]:
        assert rebuilt.report(20, step, value) == original.report(20, step, value)


def test_no_stopping_never_stops() -> None:
    rule = make_stopping_rule(None)
    assert isinstance(rule, NoStopping)
    for trial_id in range(5):
        assert rule.report(trial_id, 1, -float(trial_id)).action is Action.CONTINUE


def test_factory_names_and_history_as_tuples() -> None:
    assert STOPPING_RULES == ("none", "asha", "median")
    rule = make_stopping_rule("asha", eta=2, history=[(0, 1, 0.9), (1, 1, 0.1), (2, 1, None)])
    assert set(rule.stopped) == {1}
    assert rule.rung_values(0) == {0: 0.9, 1: 0.1}


def test_factory_refuses_bad_names_and_options() -> None:
    with pytest.raises(StrategyError, match=r"unknown stopping rule 'hyperband'; valid rules: none, asha, median"):
        make_stopping_rule("hyperband")
    with pytest.raises(
        StrategyError,
        match=r"stopping rule 'median' does not take option\(s\) eta; its options are: grace_steps, metric, min_trials",
    ):
        make_stopping_rule("median", eta=3)
    with pytest.raises(StrategyError, match=r"median option min_trials=0 must be a whole number >= 1"):
        make_stopping_rule("median", min_trials=0)
    with pytest.raises(StrategyError, match=r"median option grace_steps=-1 must be a whole number >= 0"):
        make_stopping_rule("median", grace_steps=-1)
