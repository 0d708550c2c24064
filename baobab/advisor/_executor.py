"""The executor interface: what the job driver needs from whatever runs trials.

The driver writes a trial row (PENDING) and then submits its id, or the ids of a fused
group (trials of one sub-job the worker trains as one stacked computation, see
:func:`baobab.model.train_fused`) as one unit of work; it never learns where they run.
Whoever runs a trial stores the outcome in its row (RUNNING, then COMPLETED, STOPPED,
ERRORED or CANCELLED with score, error and traceback) and then publishes
``TRIAL_FINISHED`` on the event channel. Implementations live in
:mod:`baobab.worker` (local processes; Celery, Docker and Kubernetes later); they
satisfy this protocol without importing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Executor"]


class Executor(Protocol):
    #: Trials per slot the driver may submit besides the one running, to wait in the executor's
    #: queue: where handing a trial to a worker takes a while (a broker, an API call), workers
    #: then start the next trial at once instead of waiting for the driver. 0 for a local executor.
    queue_ahead: int

    @property
    def slots(self) -> int:
        """How many trials can run at once, over every job."""
        ...

    #: Executors that know their machines also tell ``slot_threads``: the cores of one CPU slot (None: not
    #: known yet). A CPU job whose launches ask for more threads then holds that many slots' worth of them
    #: (:func:`~baobab.advisor._scheduling.launch_slots`); without it each launch holds one slot.

    def submit(self, trials: int | Sequence[int]) -> None:
        """Run the PENDING trial ``trials`` as soon as a slot is free; returns at once.

        A sequence of ids is a fused group: one unit of work taking one slot, whose members
        each keep their own row (claim, records, outcome) and may be stopped or cancelled
        alone. A member requeued (its worker died) is submitted again by itself.
        """
        ...

    def request_stop(self, trial_id: int, reason: str) -> None:
        """Ask a running trial to end early (its score still counts); no effect on a finished one."""
        ...

    def cancel(self, trial_id: int, reason: str) -> None:
        """Drop a pending or running trial at once (killing what runs it): it ends CANCELLED with ``reason``."""
        ...

    def active(self) -> set[int]:
        """The trials submitted and not yet finished: after a restart, what a fresh executor does not hold is lost."""
        ...

    def close(self) -> None:
        """Release the workers, killing what runs, and leave those trials' rows as they are.

        A shutdown is no verdict on a trial: the next driver finds it lost and runs it again.
        """
        ...
