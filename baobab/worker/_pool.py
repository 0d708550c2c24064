"""What the container executors keep running, read from the metadata store.

The docker and kubernetes executors are pool managers on top of the Celery executor:
trials still travel through Celery, and these managers only decide how many worker
containers (or pods) and which predictors exist. :func:`plan` turns the running jobs into
:class:`Unit` s; a backend reconciles what it runs with them, so a manager that crashed
and came back needs no memory of its own: the store and the labels on what it started
say everything.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine

from baobab.store import InferenceJob, InferenceJobStatus, JobStatus, TrainJob

__all__ = ["ACTIVE_TRAIN", "Unit", "plan", "run_reconciler"]

logger = logging.getLogger(__name__)

ACTIVE_TRAIN = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.STOPPING)
_ACTIVE_INFERENCE = (InferenceJobStatus.STARTING, InferenceJobStatus.RUNNING)


@dataclass(frozen=True)
class Unit:
    """One thing to keep running for one job.

    Attributes:
        kind: ``worker`` (trials of a train job) or ``predictor`` (an inference job).
        job_id: The train or inference job it serves; labels carry it.
        gpus: GPUs it asks for; 0 means CPU slots.
        slots: Trials at once (one per GPU for GPU workers).
        threads: CPUs each slot needs, when the job's ``options.resources`` ask (None: the pool's per slot).
        memory_mb: Memory each slot needs, when the job's ``options.resources`` ask (None: the pool's per slot).
    """

    kind: str
    job_id: int
    gpus: int
    slots: int
    threads: int | None = None
    memory_mb: int | None = None

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.job_id}"


def plan(engine: Engine, *, cpu_slots: int) -> dict[str, Unit]:
    """The units the running jobs ask for: a worker per active train job, a predictor per served one.

    A train job's ``GPU_COUNT`` GPUs (or ``cpu_slots`` CPU slots when it is 0) is what the
    advisor lets it use at once, so that is what its worker is given, each slot with the threads
    and memory its launches ask for (``options.resources``).
    """
    units: dict[str, Unit] = {}
    with engine.connect() as conn:
        active = select(TrainJob.id, TrainJob.budget, TrainJob.options).where(TrainJob.status.in_(ACTIVE_TRAIN))
        for job_id, budget, options in conn.execute(active):
            gpus = int((budget or {}).get("GPU_COUNT", 0) or 0)
            resources = (options or {}).get("resources") or {}
            unit = Unit("worker", job_id, gpus, gpus or cpu_slots, resources.get("threads"), resources.get("memory_mb"))
            units[unit.name] = unit
        for (job_id,) in conn.execute(select(InferenceJob.id).where(InferenceJob.status.in_(_ACTIVE_INFERENCE))):
            unit = Unit("predictor", job_id, 0, 1)
            units[unit.name] = unit
    return units


def run_reconciler(reconcile: Callable[[], object], stop: threading.Event, *, interval_s: float, what: str) -> None:
    """Calls ``reconcile`` every ``interval_s`` until ``stop``; a failed round is logged and retried.

    The backends' APIs (dockerd, the Kubernetes API server) can be briefly away; the next
    round converges, so one failure must not end the manager.
    """
    while not stop.is_set():
        try:
            reconcile()
        except Exception:  # any API error: log, retry next round
            logger.exception("%s: reconcile failed; retrying in %g s", what, interval_s)
        stop.wait(interval_s)
