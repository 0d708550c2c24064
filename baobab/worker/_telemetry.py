"""The workers' Prometheus metrics: trials run, by the state they ended in, and time per phase.

The trial runner measures each trial's phases (:class:`Phase`, in
:attr:`~baobab.worker.TrialOutcome.phases`); whoever hosts the metrics records the
outcome with :func:`record_trial`. A ``baobab worker`` pool process records its own, and
the worker's main process serves what all its pool processes recorded
(``--metrics-port``, multiprocess mode: :mod:`baobab._prometheus`). A local worker of
``baobab up`` sends its outcomes to the executor, which records them in the API's process,
where the API's ``/metrics`` shows them; that worker runs templates, so what it sends is
checked here rather than trusted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from baobab.enums import TimePhase, TrialState

__all__ = ["PHASE_SECONDS", "TRIALS", "Phase", "record_trial"]


#: The phases of a trial (the worker measures all but ``WAIT``). The members of a fused group share
#: their fetch and their training: each counts its share of it (see ``baobab.worker._runner._timed``).
Phase = TimePhase


_PHASES = frozenset(phase.value for phase in Phase)

TRIALS = Counter("baobab_worker_trials", "Trials this worker ran, by the state they ended in", ["state"])
PHASE_SECONDS = Histogram(
    "baobab_worker_phase_seconds",
    "Time a trial spent in each phase of its run",
    ["phase"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0),
)


def record_trial(state: Any, phases: Any) -> None:
    """Count a trial that ran and ended in ``state`` (a :class:`TrialState` or its value; anything else,
    such as None for a row that is gone, counts as ``unknown``), and the seconds it spent in each of
    ``phases`` (phase → seconds). Unknown phases, and values that are no duration, are left out."""
    TRIALS.labels(_state_name(state)).inc()
    if not isinstance(phases, Mapping):
        return
    for name, seconds in phases.items():
        if name in _PHASES and _duration(seconds):
            PHASE_SECONDS.labels(name).observe(seconds)


def _state_name(state: Any) -> str:
    try:
        return TrialState(state).value
    except ValueError:
        return "unknown"


def _duration(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
