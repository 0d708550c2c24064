"""What the cluster offers a train job, and the refusal of a job that asks for more.

The executors keep what each live worker machine has in the store (``workers``: the local
executor its own machine, the Celery executor what every worker answers). A job may hold
at most the GPUs the live workers have in all (``GPU_COUNT`` counts the GPUs a job holds at
once, over every machine), and each of its launches at most the cores and memory of the
largest machine (``options.resources``). The pool executors (docker, kubernetes) start
workers as jobs ask for them, so what runs now says nothing of what they may start: there,
and before any worker has said what it has, the GPUs are what the settings say
(:meth:`Settings.gpus_offered <baobab.Settings.gpus_offered>`), and cores and memory are not
checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from baobab._settings import Executor, Settings
from baobab.advisor import TrainJobOptions
from baobab.exceptions import RequestError
from baobab.store import Inventory, live_workers

__all__ = ["ClusterOffer", "check_resources", "cluster_offer"]

#: The pool executors, which start worker machines as the jobs ask for them.
_POOLS = (Executor.DOCKER, Executor.KUBERNETES)
#: Workers named in an error message; the rest are counted.
_NAMED = 4


@dataclass(frozen=True)
class ClusterOffer:
    """The most a job may ask for: ``gpus`` in all; each launch ``cores`` and ``memory_mb`` (None: not checked).

    ``workers`` are the live worker machines it was read from (none: from the settings).
    """

    gpus: int
    cores: int | None = None
    memory_mb: int | None = None
    workers: dict[str, Inventory] = field(default_factory=dict)

    def source(self) -> str:
        """Where the figures come from, as an error message says it."""
        if not self.workers:
            return "BAOBAB_GPUS"
        named = [f"{name}: {_machine(inventory)}" for name, inventory in list(self.workers.items())[:_NAMED]]
        more = len(self.workers) - len(named)
        return "live workers " + "; ".join(named) + (f"; and {more} more" if more else "")


def cluster_offer(session: Session, settings: Settings, now: datetime | None = None) -> ClusterOffer:
    """What the cluster offers now (see the module docstring)."""
    live = {} if settings.executor in _POOLS else live_workers(session, now or datetime.now(UTC))
    if not live:
        return ClusterOffer(gpus=settings.gpus_offered())
    return ClusterOffer(
        gpus=sum(len(inventory.gpus) for inventory in live.values()),
        cores=max(inventory.cores for inventory in live.values()),
        memory_mb=max(inventory.memory_mb for inventory in live.values()),
        workers=live,
    )


def check_resources(gpu_count: int, options: TrainJobOptions, offer: ClusterOffer) -> None:
    """Refuse a job that asks for more than ``offer`` (a 400 naming the field and what the cluster has).

    Raises:
        RequestError: ``budget.GPU_COUNT`` above the GPUs offered, or a launch's threads or memory above
            the largest machine's cores or memory.
    """
    if gpu_count > offer.gpus:
        has = f"has {offer.gpus} GPU{'' if offer.gpus == 1 else 's'}" if offer.gpus else "has no GPU"
        raise RequestError(
            f"budget.GPU_COUNT is {gpu_count}, but this platform {has} ({offer.source()}); ask for at most "
            f"{offer.gpus}{', or 0 to train on CPU slots' if offer.gpus else ': 0 trains on CPU slots'}",
            field="budget.GPU_COUNT",
        )
    asked = options.resources
    for name, value, most, unit in (
        ("threads", asked.threads, offer.cores, "cores"),
        ("memory_mb", asked.memory_mb, offer.memory_mb, "MiB"),
    ):
        if value is not None and most is not None and value > most:
            raise RequestError(
                f"options.resources.{name} is {value}, but the largest worker machine has {most} {unit} "
                f"({offer.source()}); ask for at most {most}, or leave it out for a slot's share",
                field=f"options.resources.{name}",
            )


def _machine(inventory: Inventory) -> str:
    gpus = len(inventory.gpus)
    return (
        f"{inventory.cores} cores, {inventory.memory_mb} MiB, "
        f"{gpus or 'no'} GPU{'' if gpus == 1 else 's'}, {inventory.slots} slot{'' if inventory.slots == 1 else 's'}"
    )
