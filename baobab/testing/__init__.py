"""Test helpers for Baobab and its plugins: contract suites and synthetic objectives."""

from baobab.testing._strategy_contract import StrategyContract, every_knob_type, run_search, typed
from baobab.testing._synthetic import BRANIN_BEST, branin_knob_config, branin_score

__all__ = [
    "BRANIN_BEST",
    "StrategyContract",
    "branin_knob_config",
    "branin_score",
    "every_knob_type",
    "run_search",
    "typed",
]
