"""The autoscaling policy's decisions on known load samples: up after a short window, down after a long one."""

from __future__ import annotations

import pytest

from baobab.predictor._scaling import Sample, ScalingPolicy

POLICY = ScalingPolicy(min_replicas=1, max_replicas=3, target=8.0, up_after_s=2.0, down_after_s=10.0)


def samples(loads: list[int], every_s: float = 0.5) -> list[Sample]:
    return [Sample(i * every_s, load) for i, load in enumerate(loads)]


def test_a_load_above_the_target_adds_a_replica_once_it_lasted_the_up_window() -> None:
    assert POLICY.decide(1, samples([20] * 4)) == 0  # 1.5 s: not long enough
    assert POLICY.decide(1, samples([20] * 5)) == 1
    assert POLICY.decide(2, samples([20] * 5)) == 1  # 20 > 2 x 8
    assert POLICY.decide(3, samples([20] * 5)) == 0  # at the maximum


def test_only_the_last_up_window_counts_and_a_load_at_the_target_is_enough() -> None:
    assert POLICY.decide(1, samples([0] * 10 + [12] * 5)) == 1  # an earlier quiet spell does not hold it back
    assert POLICY.decide(1, samples([12] * 10 + [0] * 5)) == 0
    assert POLICY.decide(2, samples([16] * 5)) == 0  # exactly 2 x 8: the two keep up


def test_a_replica_goes_only_when_the_long_window_fits_one_fewer() -> None:
    quiet = [8] * 21  # 10 s at the load one replica is meant for
    assert POLICY.decide(2, samples(quiet)) == -1
    assert POLICY.decide(2, samples(quiet[:-1])) == 0  # 9.5 s: not long enough
    assert POLICY.decide(2, samples([9] * 21)) == 0  # one replica would be past its target
    assert POLICY.decide(3, samples([9] * 21)) == -1  # two would not
    assert POLICY.decide(1, samples([0] * 21)) == 0  # at the minimum


def test_a_burst_inside_the_long_window_keeps_the_replicas_and_one_before_it_does_not() -> None:
    burst = [0] * 10 + [40] * 6 + [0] * 5  # a mean of 11.4 over the 10 s
    assert POLICY.decide(2, samples(burst)) == 0
    assert POLICY.decide(2, samples(burst + [0] * 12)) == -1  # the last 10 s hold 4 of its samples: a mean of 7.6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_replicas": 0}, "1 <= min_replicas"),
        ({"min_replicas": 3, "max_replicas": 2}, "min_replicas \\(3\\) <= max_replicas \\(2\\)"),
        ({"target": 0}, "target=0 must be positive"),
        ({"down_after_s": -1}, "down_after_s=-1 must be positive"),
    ],
)
def test_bad_bounds_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScalingPolicy(**kwargs)  # type: ignore[arg-type]
