"""Deterministic mode (the job option ``deterministic``): the same trials for a seed, whatever the workers.

With several workers, trials finish in an order that depends on timing, and a strategy
that learned from whatever had finished proposes differently from one run to the next.
In deterministic mode the proposal of trial ``n`` of a sub-job depends only on the
results of its trials numbered below ``n - W``, for a window ``W`` (:data:`WINDOW`) fixed
for the job: the driver shows a finished trial's result to the strategy only once the
window has passed it, counts the trials numbered ``n - W`` to ``n - 1`` as pending (in
number order, finished or not), and starts trial ``n`` only once every trial below
``n - W`` has ended, waiting for the slowest when it must. Proposals are seeded by
``(seed, n)`` already, so trial ``n``'s knobs are a function of the seed, the templates
and the results of earlier-numbered trials alone, and so, by induction, of the seed, the
data and the templates.

The window is a constant, not the job's worker count, so that 1 and 16 workers give the
same trials. At most ``W + 1`` trials of a sub-job run at once; a larger window waits less
for a slow trial but proposes from older results. 8 is twice the usual 4-GPU job's slots
and as much delay as an 8-worker asynchronous search has anyway; the docs' train-jobs
page gives what waiting cost in the simulation (``bench/deterministic.py``).

What it costs is measured: :class:`WindowWait` adds up, per job, the time its slots stood
idle because of the window (stored on the job, shown in its JSON as ``determinism``).

Parts whose decisions depend on timing are refused with the mode (:func:`check_deterministic`):
early-stopping rules (a stop request reaches a running trial between two of its reports, so
where it stops depends on timing), fused groups (their sizes follow the free slots and the
time left) and ENAS (its phases follow measured durations, and shared-weight updates are
added in the order trials finish).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baobab.advisor._job_options import FusionMode, JobOptions, StoppingRuleName
from baobab.exceptions import StrategyError

__all__ = ["WINDOW", "WindowWait", "check_deterministic"]

#: W: trial n's proposal learns from the results of trials numbered below n - W only.
WINDOW = 8


def check_deterministic(strategy: str, options: JobOptions) -> None:
    """Refuses, with a message that says how to fix it, what deterministic mode cannot make repeatable.

    Raises:
        StrategyError: ``options.deterministic`` with an early-stopping rule, fusion or the ENAS strategy.
    """
    if not options.deterministic:
        return
    if options.stopping_rule != StoppingRuleName.NONE:
        raise StrategyError(
            f"deterministic: true does not work with early stopping (rule '{options.stopping_rule}'): a stop "
            "request reaches a running trial between two of its reports, so where it stops depends on timing; "
            'set early_stopping to "none" or deterministic to false'
        )
    if options.fusion != FusionMode.OFF:
        raise StrategyError(
            f"deterministic: true does not work with fusion ('{options.fusion}'): group sizes follow the free "
            'slots and the time left; set fusion to "off" or deterministic to false'
        )
    if strategy == "enas":
        raise StrategyError(
            "deterministic: true does not work with the enas strategy: its phases follow measured trial "
            "durations and shared-weight updates add up in the order trials finish; choose another strategy "
            "or set deterministic to false"
        )


@dataclass
class WindowWait:
    """What the window cost a job: ``wait_s`` seconds during which it held at least one slot idle that its
    cap gave it and another trial would have taken, and ``idle_slot_s`` slot-seconds held so (two slots
    for ten seconds: 20). The driver notes how many slots the window holds after each pass over the free
    slots (:meth:`note`); between two passes that number stands."""

    window: int = WINDOW
    wait_s: float = 0.0
    idle_slot_s: float = 0.0
    #: Slots held idle since ``since`` (the last pass), when any.
    held: int = 0
    since: float | None = None

    @classmethod
    def from_record(cls, record: Any) -> WindowWait:
        """The wait a job's stored record (:meth:`record`) says, to go on adding to after a restart."""
        if not isinstance(record, dict):
            return cls(window=WINDOW)
        return cls(
            window=int(record.get("window", WINDOW)),
            wait_s=float(record.get("wait_s", 0.0)),
            idle_slot_s=float(record.get("idle_slot_s", 0.0)),
        )

    def note(self, held: int, now: float) -> bool:
        """The window holds ``held`` slots idle from ``now`` on; True when a wait just ended (worth storing)."""
        if self.since is not None:
            elapsed = max(0.0, now - self.since)
            self.wait_s += elapsed
            self.idle_slot_s += self.held * elapsed
        ended = self.held > 0 and held == 0
        self.held, self.since = held, (now if held > 0 else None)
        return ended

    def record(self) -> dict[str, Any]:
        """What the job stores and its JSON shows."""
        return {"window": self.window, "wait_s": round(self.wait_s, 3), "idle_slot_s": round(self.idle_slot_s, 3)}
