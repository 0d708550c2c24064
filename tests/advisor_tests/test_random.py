from __future__ import annotations

import numpy as np
import pytest

from baobab.advisor import RandomStrategy, Strategy
from baobab.model import FloatKnob, IntegerKnob
from baobab.testing import StrategyContract


class TestRandomContract(StrategyContract):
    @pytest.fixture
    def strategy_class(self) -> type[Strategy]:
        return RandomStrategy


def test_log_scale_knobs_are_drawn_log_uniformly() -> None:
    strategy = RandomStrategy(
        {"lr": FloatKnob(1e-4, 1.0, is_exp=True), "n": IntegerKnob(1, 10_000, is_exp=True)}, seed=0
    )
    draws = [strategy.propose(i) for i in range(1000)]
    lr = np.array([k["lr"] for k in draws])
    n = np.array([k["n"] for k in draws])
    # Half of the log range lies below 1e-2 (lr) and below 100 (n); a linear draw gives 1%.
    assert 0.44 < np.mean(lr < 1e-2) < 0.56
    assert 0.44 < np.mean(n < 100) < 0.56
    assert lr.min() >= 1e-4 and lr.max() <= 1.0 and n.min() >= 1 and n.max() <= 10_000
