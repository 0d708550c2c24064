"""ASHA as a stopping rule: rungs, promotion of the top 1/eta without waiting, rebuilds."""

from __future__ import annotations

import math
import random

import pytest

from baobab.advisor import Action, AshaRule, Finish, MedianRule, Report, make_stopping_rule
from baobab.exceptions import StrategyError


def decide(rule: AshaRule, trial_id: int, step: int, value: float | None) -> Action:
    return rule.report(trial_id, step, value).action


def test_rungs_are_at_min_resource_times_powers_of_eta() -> None:
    rule = AshaRule(eta=3, min_resource=2)
    assert [rule.rung_step(k) for k in range(4)] == [2, 6, 18, 54]
    rule.report(0, 100, 0.5)  # one report far up reaches every rung below it
    assert [bool(rule.rung_values(k)) for k in range(5)] == [True, True, True, True, False]
    capped = AshaRule(eta=3, min_resource=2, max_resource=18)
    capped.report(0, 100, 0.5)
    assert [bool(capped.rung_values(k)) for k in range(3)] == [True, True, False]  # none at the trial's end


def test_top_third_of_a_rung_goes_on_as_values_arrive() -> None:
    rule = AshaRule()  # eta 3, first rung at step 1
    assert decide(rule, 0, 0, 0.1) is Action.CONTINUE  # below the first rung
    # At rung 0 (step 1) the trial goes on when its value is at least the max(1, n // 3)-th best of n.
    expected = [
        (0, 0.50, Action.CONTINUE),  # n=1: alone, the best
        (1, 0.40, Action.STOP),  # n=2: 1 goes on, 0.50 is better
        (2, 0.60, Action.CONTINUE),  # n=3: the best
        (3, 0.55, Action.STOP),  # n=4: 1 goes on (0.60)
        (4, 0.30, Action.STOP),  # n=5
        (5, 0.58, Action.CONTINUE),  # n=6: 2 go on: 0.60, 0.58
        (6, 0.58, Action.CONTINUE),  # n=7: a tie with the 2nd best goes on
        (7, 0.57, Action.STOP),  # n=8: 2 go on, cut-off 0.58
        (8, 0.59, Action.CONTINUE),  # n=9: 3 go on: 0.60, 0.59, 0.58
    ]
    for trial_id, value, action in expected:
        assert decide(rule, trial_id, 1, value) is action, (trial_id, value)
    assert rule.rung_values(0) == {t: v for t, v, _ in expected}
    assert set(rule.stopped) == {1, 3, 4, 7}
    reason = rule.stopped[7]
    assert reason == (
        "asha: value 0.57 at step 1 is not in the top 2 of the 8 trials at rung 0 (step 1); the cut-off is 0.58"
    )


def test_promotion_does_not_wait_for_stragglers() -> None:
    rule = AshaRule(eta=3)
    # Trial 0 is fast: it climbs rungs 0, 1 and 2 while trials 1 and 2 are still before rung 0.
    for step, value in [(1, 0.5), (3, 0.6), (9, 0.7)]:
        assert rule.report(0, step, value).action is Action.CONTINUE
    assert decide(rule, 1, 0, 0.9) is Action.CONTINUE
    # The stragglers are judged against what the rungs hold when they arrive, and
    # trial 0's earlier promotions stand even though trial 1 beats it.
    assert decide(rule, 1, 1, 0.9) is Action.CONTINUE
    assert decide(rule, 2, 1, 0.45) is Action.STOP
    assert decide(rule, 0, 10, 0.71) is Action.CONTINUE  # no rung between 9 and 27
    assert rule.rung_values(1) == {0: 0.6} and rule.rung_values(2) == {0: 0.7}


def test_first_report_past_a_rung_counts_there_and_later_ones_do_not() -> None:
    rule = AshaRule(eta=2)  # rungs at 1, 2, 4
    rule.report(0, 1, 0.8)
    rule.report(0, 2, 0.8)
    assert decide(rule, 1, 3, 0.5) is Action.STOP  # reaches rungs 0 and 1 at once; stopped at rung 0
    assert rule.rung_values(0) == {0: 0.8, 1: 0.5} and rule.rung_values(1) == {0: 0.8}
    rule.report(2, 1, 0.9)
    rule.report(2, 1, 0.1)  # a second report at the same rung changes nothing
    assert rule.rung_values(0)[2] == 0.9


def test_stopped_trials_stay_stopped_and_add_nothing() -> None:
    rule = AshaRule()
    rule.report(0, 1, 0.9)
    first = rule.report(1, 1, 0.1)
    assert first.stop
    again = rule.report(1, 3, 0.99)  # a straggling report after the stop
    assert again == first
    assert rule.rung_values(1) == {}


def test_missing_values_decide_nothing() -> None:
    rule = AshaRule()
    for value in (None, math.nan, math.inf):
        decision = rule.report(0, 1, value)
        assert decision.action is Action.CONTINUE and "no finite value at step 1" in decision.reason
    assert rule.rung_values(0) == {}


def test_lower_is_better_with_mode_min() -> None:
    rule = AshaRule(mode="min", metric="loss")
    assert decide(rule, 0, 1, 0.3) is Action.CONTINUE
    decision = rule.report(1, 1, 0.9)
    assert decision.stop and "value 0.9 " in decision.reason and "cut-off is 0.3" in decision.reason
    assert decide(rule, 2, 1, 0.1) is Action.CONTINUE
    assert rule.rung_values(0) == {0: 0.3, 1: 0.9, 2: 0.1}
    assert rule.value_of({"loss": 0.2, "train_score": 0.9}) == 0.2


def test_finished_trials_late_reports_are_recorded_but_decide_nothing() -> None:
    rule = AshaRule()
    rule.report(0, 1, 0.9)
    rule.finished(1, 0.5)
    assert decide(rule, 1, 1, 0.1) is Action.CONTINUE  # the metric row came after the trial ended
    assert rule.rung_values(0) == {0: 0.9, 1: 0.1} and not rule.stopped


def test_value_of_reads_the_metric() -> None:
    rule = AshaRule()
    assert rule.value_of({"loss": 0.1, "train_score": 0.7}) == 0.7
    assert rule.value_of({"train_score": 0.7, "val_score": 0.6}) == 0.6  # the validation score first
    assert rule.value_of({"loss": 0.1}) is None
    assert rule.value_of({"val_score": None, "score": 0.4}) == 0.4
    assert rule.value_of({"val_score": math.nan}) is None
    assert AshaRule(metric="acc").value_of({"acc": 1, "val_score": 0.5}) == 1.0


def random_run(seed: int, trials: int = 30) -> list[Report | Finish]:
    """Interleaved reports of trials with random curves, each trial ending at a random step."""
    rng = random.Random(seed)
    running = {t: (rng.random(), rng.randint(2, 12)) for t in range(trials)}
    step = dict.fromkeys(running, 0)
    events: list[Report | Finish] = []
    while running:
        trial_id = rng.choice(sorted(running))
        level, end = running[trial_id]
        events.append(Report(trial_id, step[trial_id], level * (1 - 0.5 ** step[trial_id]) + rng.gauss(0, 0.02)))
        step[trial_id] += 1
        if step[trial_id] == end:
            del running[trial_id]
            events.append(Finish(trial_id, level))
    return events


@pytest.mark.parametrize("seed", [0, 1])
def test_rebuild_gives_the_same_rule(seed: int) -> None:
    events = random_run(seed)
    original = AshaRule(eta=2)
    decisions = {}
    for event in events:
        if isinstance(event, Finish):
            original.finished(event.trial_id, event.value)
        else:
            decisions[event] = original.report(event.trial_id, event.step, event.value)
    assert original.stopped, "the run should stop some trials"
    rebuilt = make_stopping_rule("asha", eta=2, history=events)
    assert rebuilt.stopped == original.stopped
    for rung in range(4):
        assert rebuilt.rung_values(rung) == original.rung_values(rung)
    # Both answer a new trial's reports alike.
    for step, value in [(1, 0.5), (2, 0.6), (4, 0.62), (8, 0.7)]:
        assert rebuilt.report(99, step, value) == original.report(99, step, value)


def test_options_are_checked() -> None:
    for options, message in [
        ({"eta": 1}, "asha option eta=1 must be a whole number >= 2"),
        ({"eta": 2.5}, "asha option eta=2.5 must be a whole number >= 2"),
        ({"min_resource": 0}, "asha option min_resource=0 must be a whole number >= 1"),
        ({"min_resource": 3, "max_resource": 3}, "max_resource=3 must be greater than min_resource=3"),
        ({"mode": "up"}, "asha option mode='up' must be 'max' or 'min'"),
        ({"metric": ""}, "asha option metric='' must be a metric name or None"),
    ]:
        with pytest.raises(StrategyError, match=message):
            AshaRule(**options)
    with pytest.raises(TypeError, match="step must be an int, got 1.0"):
        AshaRule().report(0, 1.0, 0.5)  # type: ignore[arg-type]


def test_the_expected_share_of_a_trial_follows_the_rungs() -> None:
    """eta 3 from step 1: all run steps 0-1, a third steps 2-3, a ninth steps 4-9 of ten."""
    rule = AshaRule(eta=3, min_resource=1)
    assert rule.expected_share(10) == pytest.approx((2 + 2 / 3 + 6 / 9) / 10)
    assert rule.expected_share(1) == 1.0  # no rung before its end
    assert rule.expected_share(2) == 1.0  # its one rung is its last step
    capped = AshaRule(eta=2, min_resource=1, max_resource=3)  # rungs at steps 1 and 2; 4 is past 3
    assert capped.expected_share(10) == pytest.approx((2 + 1 / 2 * 1 + 1 / 4 * 7) / 10)
    assert MedianRule().expected_share(10) == 1.0  # a rule that cannot tell ahead says all
