"""The placement cost model: what it predicts from finished trials and packing profiles."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from baobab.advisor.placement import CostModel, Machine, Measured, forecast_job


def test_nothing_measured_is_no_estimate() -> None:
    cost = CostModel()
    assert cost.estimate("mlp", "s", {"epochs": 2}) is None
    assert not cost.knows("mlp")
    cost.observe("mlp", "s", {"epochs": 2}, seconds=0.0)  # no time: nothing learned
    assert not cost.knows("mlp")


def test_one_trial_predicts_its_own_time() -> None:
    cost = CostModel()
    cost.observe("mlp", "s", {"epochs": 2}, seconds=12.0)
    estimate = cost.estimate("mlp", "s", {"epochs": 2})
    assert estimate is not None and estimate.seconds == pytest.approx(12.0, rel=0.05)


def test_the_regression_follows_a_knob_to_settings_not_yet_seen() -> None:
    cost = CostModel()
    for epochs in (1, 2, 3, 4, 6, 8):
        for width in (16, 64):
            cost.observe("mlp", "s", {"epochs": epochs, "width": width, "act": "relu"}, seconds=2.0 * epochs)
    seen = cost.estimate("mlp", "s", {"epochs": 4, "width": 16, "act": "relu"})
    unseen = cost.estimate("mlp", "s", {"epochs": 16, "width": 32, "act": "relu"})
    assert seen is not None and unseen is not None
    assert seen.seconds == pytest.approx(8.0, rel=0.1)
    assert unseen.seconds == pytest.approx(32.0, rel=0.2)
    assert unseen.spread > seen.spread  # further from what was measured, less sure


def test_threads_divide_the_time_up_to_the_most_measured_until_two_counts_were_measured() -> None:
    cost = CostModel()
    cost.observe("cnn", "s", {}, seconds=20.0, threads=2)
    one = cost.estimate("cnn", "s", {}, threads=1)
    assert one is not None and one.seconds == pytest.approx(40.0, rel=0.05)
    # no more speed from threads than measured
    four = cost.estimate("cnn", "s", {}, threads=4)
    assert four is not None and four.seconds == pytest.approx(20.0, rel=0.05)
    # measured: a second thread saves nothing for this kind
    for _ in range(5):
        cost.observe("cnn", "s", {}, seconds=20.0, threads=1)
        cost.observe("cnn", "s", {}, seconds=20.0, threads=2)
    one = cost.estimate("cnn", "s", {}, threads=1)
    assert one is not None and one.seconds == pytest.approx(20.0, rel=0.15)


def test_a_profile_gives_the_time_of_a_group_and_its_best_size() -> None:
    cost = CostModel()
    assert cost.group_factor("mlp", "s", 4) == 4.0  # no profile: a group of 4 takes 4 trials' time
    assert cost.best_group("mlp", "s", 64) == 1
    cost.observe_profile("mlp", "s", {1: 100.0, 4: 300.0, 16: 500.0, 64: 400.0}, memory={1: 10.0, 16: 100.0})
    assert cost.group_factor("mlp", "s", 4) == pytest.approx(4 * 100 / 300)
    assert cost.group_factor("mlp", "s", 8) == pytest.approx(8 * 100 / math.sqrt(300 * 500))  # log-log between 4 and 16
    assert cost.best_group("mlp", "s", 64) == 16
    assert cost.best_group("mlp", "s", 8) == 4
    cost.observe("mlp", "s", {}, seconds=10.0)
    group = cost.estimate("mlp", "s", {}, group=16)
    assert group is not None
    assert group.seconds == pytest.approx(10.0 * 16 * 100 / 500, rel=0.05)
    assert group.memory == pytest.approx(100.0)


def test_a_fused_trial_teaches_the_time_of_one_member() -> None:
    cost = CostModel()
    cost.observe_profile("mlp", "s", {1: 100.0, 8: 400.0})
    cost.observe("mlp", "s", {}, seconds=20.0, group=8)  # 8 members in 20 s: one alone takes 10 s
    alone = cost.estimate("mlp", "s", {})
    assert alone is not None and alone.seconds == pytest.approx(10.0, rel=0.05)


def test_a_forecast_runs_each_trial_for_its_expected_share() -> None:
    """Trials of 10 s, one slot: all of each without early stopping, a third of each under a rule that says so."""
    measured = [Measured("mlp", "s", {"epochs": 9}, 10.0) for _ in range(3)]
    machines = [Machine("m", cores=1, slots=1)]
    plain, _ = forecast_job(["mlp"], measured, trials=3, machines=machines, cap=1)
    stopped, _ = forecast_job(["mlp"], measured, trials=3, machines=machines, cap=1, share=lambda knobs: 1 / 3)
    fcfs = {f.method: f for f in plain}["fcfs"]
    early = {f.method: f for f in stopped}["fcfs"]
    assert fcfs.makespan == pytest.approx(30.0, rel=0.05)
    assert early.makespan == pytest.approx(10.0, rel=0.05)


def test_a_noisy_kind_is_expected_to_take_its_mean_time_not_its_median() -> None:
    """Times spread log-normally: a plan adds them up, so what it needs of one is their mean."""
    rng = random.Random(3)
    times = [10.0 * math.exp(rng.gauss(0.0, 0.8)) for _ in range(200)]
    cost = CostModel()
    for seconds in times:
        cost.observe("k", "", {"epochs": 5}, seconds=seconds)
    estimate = cost.estimate("k", "", {"epochs": 5})
    assert estimate is not None
    assert estimate.seconds == pytest.approx(statistics.mean(times), rel=0.1)
    assert estimate.seconds > 1.2 * statistics.median(times)


def test_a_kind_is_refitted_once_its_new_samples_are_a_tenth_of_the_rest() -> None:
    """The driver asks at every trial's end; one more sample of a hundred is not worth a refit."""
    cost = CostModel()
    for _ in range(100):
        cost.observe("k", "", {"epochs": 5}, seconds=10.0)
    before = cost.estimate("k", "", {"epochs": 5})
    for _ in range(9):
        cost.observe("k", "", {"epochs": 5}, seconds=100.0)
    unchanged = cost.estimate("k", "", {"epochs": 5})
    cost.observe("k", "", {"epochs": 5}, seconds=100.0)  # the tenth
    after = cost.estimate("k", "", {"epochs": 5})
    assert before is not None and unchanged is not None and after is not None
    assert unchanged.seconds == before.seconds < after.seconds
