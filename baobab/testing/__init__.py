"""Test helpers for Baobab and its plugins: contract suites, synthetic objectives, a platform to drive, a simulated
cluster for the job driver, waiting, reading ``/metrics``."""

from baobab.testing._cluster import LocalCluster, Service
from baobab.testing._local_platform import LocalPlatform
from baobab.testing._parts import missing_part
from baobab.testing._scrape import Scrape, scrape
from baobab.testing._serving import post_raw, serve_in_thread
from baobab.testing._simulated import (
    SimulatedCluster,
    SimulatedWork,
    Simulation,
    VirtualClock,
    add_simulated_jobs,
    run_simulation,
)
from baobab.testing._strategy_contract import StrategyContract, every_knob_type, run_search, typed
from baobab.testing._synthetic import BRANIN_BEST, branin_knob_config, branin_score
from baobab.testing._waiting import wait_until

__all__ = [
    "BRANIN_BEST",
    "LocalCluster",
    "LocalPlatform",
    "Scrape",
    "Service",
    "SimulatedCluster",
    "SimulatedWork",
    "Simulation",
    "VirtualClock",
    "add_simulated_jobs",
    "StrategyContract",
    "branin_knob_config",
    "branin_score",
    "every_knob_type",
    "missing_part",
    "post_raw",
    "run_search",
    "run_simulation",
    "scrape",
    "serve_in_thread",
    "typed",
    "wait_until",
]
