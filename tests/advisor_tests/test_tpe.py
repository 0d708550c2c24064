from __future__ import annotations

import pytest

from baobab.advisor import RandomStrategy, Strategy, TpeStrategy
from baobab.exceptions import StrategyError
from baobab.model import CategoricalKnob, IntegerKnob
from baobab.testing import StrategyContract, run_search


class TestTpeContract(StrategyContract):
    @pytest.fixture
    def strategy_class(self) -> type[Strategy]:
        return TpeStrategy

    @pytest.fixture
    def strategy_options(self) -> dict:
        return {"n_startup_trials": 5}


def test_tpe_prefers_the_good_choice_after_start_up() -> None:
    config = {f"c{i}": CategoricalKnob(list(range(6))) for i in range(5)}
    strategy = TpeStrategy(config, seed=0, n_startup_trials=10)
    proposals = run_search(strategy, 40, score=lambda k: sum(v == 2 for v in k.values()))
    # 30 model-based proposals of 5 knobs: random choices would hold about 25 twos
    # (22 to 26 measured over three seeds); TPE gave 49 to 78.
    assert sum(v == 2 for k in proposals[10:] for v in k.values()) >= 40


def test_tpe_redraws_from_the_model_instead_of_repeating_on_a_small_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"a": IntegerKnob(0, 9), "b": IntegerKnob(0, 9), "c": IntegerKnob(0, 9)}

    def score(knobs: dict) -> float:
        return -float((knobs["a"] - 7) ** 2 + (knobs["b"] - 2) ** 2 + (knobs["c"] - 4) ** 2)

    strategy = TpeStrategy(config, seed=0)
    random_draws = []  # the history's size at each random draw
    sample_new = strategy.sample_new
    monkeypatch.setattr(
        strategy, "sample_new", lambda *a, **k: random_draws.append(strategy.n_observed) or sample_new(*a, **k)
    )
    proposals = run_search(strategy, 60, score=score)
    assert len({tuple(k.values()) for k in proposals}) == 60, "a proposal repeats an observed point"
    assert random_draws[:10] == list(range(10)), "the ten start-up proposals are random"
    # On this 1000-point grid the model's best candidate is often a taken point; those
    # are redrawn from the model, not at random (0 random draws measured, seeds 0-2).
    assert len(random_draws[10:]) <= 3
    random_proposals = run_search(RandomStrategy(config, seed=0), 60, score=score)
    # Mean score of the 50 model-based proposals: -8.4 to -8.9 for TPE, -31 to -33 at random.
    assert sum(map(score, proposals[10:])) > sum(map(score, random_proposals[10:])) / 2


def test_tpe_does_not_log_or_warn(capsys: pytest.CaptureFixture[str]) -> None:
    run_search(TpeStrategy({"c": CategoricalKnob(["a", "b", "c"])}, seed=0, n_startup_trials=2), 5)
    assert capsys.readouterr().err == ""


def test_tpe_options_are_checked() -> None:
    with pytest.raises(StrategyError, match=r"tpe option n_startup_trials=0 must be a whole number >= 1"):
        TpeStrategy({}, n_startup_trials=0)
