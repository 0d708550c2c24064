"""The job driver's Prometheus metrics (not to be confused with :mod:`._metrics`, the trials' interim metrics).

In ``baobab up`` the driver is a thread of the API's process, and these appear on the
API's ``/metrics``; ``baobab advisor`` serves them on a port of its own
(``--metrics-port``). The gauges describe the driver of the process: one per process,
as both commands run.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "JOBS",
    "PROPOSAL_ERRORS",
    "PROPOSAL_SECONDS",
    "SLOTS",
    "SLOTS_BUSY",
    "TRIALS_ACTIVE",
    "TRIALS_FINISHED",
    "TRIALS_STARTED",
    "UNITS_QUEUED",
    "publish_load",
]

TRIALS_STARTED = Counter("baobab_driver_trials_started", "Trials the driver created and handed to the executor")
TRIALS_FINISHED = Counter(
    "baobab_driver_trials_finished", "Trials of the driver's jobs that reached a final state, by that state", ["state"]
)
TRIALS_ACTIVE = Gauge("baobab_driver_trials_active", "Trials handed to the executor and not finished yet")
PROPOSAL_SECONDS = Histogram(
    "baobab_driver_proposal_seconds",
    "Time a strategy took to propose a unit of work (a trial, or a fused group), by strategy",
    ["strategy"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
PROPOSAL_ERRORS = Counter("baobab_driver_proposal_errors", "Proposals that raised, by strategy", ["strategy"])
JOBS = Gauge("baobab_driver_jobs", "Train jobs the driver runs")
SLOTS = Gauge("baobab_driver_slots", "Units of work the executor runs at once")
SLOTS_BUSY = Gauge("baobab_driver_slots_busy", "Slots running a unit of work of the driver's jobs")
UNITS_QUEUED = Gauge("baobab_driver_units_queued", "Units of work handed to the executor beyond its slots, waiting")


def publish_load(*, jobs: int, trials: int, units: int, slots: int) -> None:
    """Set the gauges: ``jobs`` run, ``trials`` and ``units`` of work handed out and unfinished, ``slots`` in all."""
    JOBS.set(jobs)
    TRIALS_ACTIVE.set(trials)
    SLOTS.set(slots)
    SLOTS_BUSY.set(min(units, slots))
    UNITS_QUEUED.set(max(0, units - slots))
