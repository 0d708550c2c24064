"""What a worker reports for the metrics is checked: a local worker's messages come from a process that runs
templates, so a hostile one must not invent states, phases or durations."""

from __future__ import annotations

import math
from typing import Any

import pytest

from baobab._prometheus import exposition
from baobab.store import TrialState
from baobab.testing import Scrape
from baobab.worker._telemetry import record_trial


def read() -> Scrape:
    return Scrape.parse(exposition()[0].decode())


def test_a_trial_is_counted_by_state_and_each_phase_timed() -> None:
    before = read()
    record_trial(TrialState.STOPPED, {"train": 2.5, "store": 0.25})
    record_trial("STOPPED", {"train": 1.5})  # as a local worker's message names it
    after = read()
    assert (
        after.value("baobab_worker_trials_total", state="STOPPED")
        - before.value("baobab_worker_trials_total", state="STOPPED")
        == 2
    )
    assert after.value("baobab_worker_phase_seconds_sum", phase="train") - before.value(
        "baobab_worker_phase_seconds_sum", phase="train"
    ) == pytest.approx(4.0)
    assert (
        after.value("baobab_worker_phase_seconds_count", phase="store")
        - before.value("baobab_worker_phase_seconds_count", phase="store")
        == 1
    )


@pytest.mark.parametrize("state", [None, "HACKED", 3, ["COMPLETED"], "completed"])
def test_a_state_that_is_no_trial_state_counts_as_unknown(state: Any) -> None:
    before = read()
    record_trial(state, {})
    after = read()
    assert (
        after.value("baobab_worker_trials_total", state="unknown")
        - before.value("baobab_worker_trials_total", state="unknown")
        == 1
    )
    assert {labels["state"] for labels in after.series("baobab_worker_trials_total")} <= {*TrialState, "unknown"}


@pytest.mark.parametrize(
    "phases",
    [
        {"mining": 1.0},
        {"train": -1.0},
        {"train": math.nan},
        {"train": math.inf},
        {"train": True},
        {"train": "3"},
        {"train": None},
        ["train", 1.0],
        "train",
        None,
    ],
)
def test_phases_that_are_unknown_or_no_duration_are_left_out(phases: Any) -> None:
    before = read()
    record_trial(TrialState.COMPLETED, phases)
    after = read()
    assert after.total("baobab_worker_phase_seconds_count") == before.total("baobab_worker_phase_seconds_count")
    assert "mining" not in exposition()[0].decode()
    # the trial itself still counts
    assert (
        after.value("baobab_worker_trials_total", state="COMPLETED")
        - before.value("baobab_worker_trials_total", state="COMPLETED")
        == 1
    )
