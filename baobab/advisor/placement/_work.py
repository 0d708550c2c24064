"""What the planner plans: machines, jobs, pending trials, and a plan's launches.

Plain frozen records, so that a plan can be simulated thousands of times a second and
compared, and so that the driver, the simulator and the search speak of the same things.
Times are seconds from the moment of planning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Estimate", "Job", "Launch", "Machine", "Pending", "Plan"]


@dataclass(frozen=True)
class Machine:
    """A worker machine: ``cores`` CPU threads for its trials, and ``gpus`` devices.

    ``slots`` is how many trials it runs at once under the fixed rule (each with
    ``cores // slots`` threads), which is where the baselines start; ``memory`` is the bytes
    a unit may use: of each GPU for a unit on GPUs, of the host for one on the CPU.
    """

    name: str
    cores: int
    slots: int = 1
    gpus: int = 0
    memory: float = math.inf

    @property
    def slot_threads(self) -> int:
        """The threads of a trial under the fixed rule."""
        return max(1, self.cores // max(1, self.slots))


@dataclass(frozen=True)
class Job:
    """A running job's limits: ``cap`` units of work at once (its fair share, as the driver counts
    it), ``gpus`` devices at once (``GPU_COUNT``; 0 for a CPU job), trials started no later than
    ``deadline`` (its ``TIME_HOURS`` left), and fused groups of at most ``max_group`` trials."""

    id: int
    cap: int
    gpus: int = 0
    deadline: float = math.inf
    max_group: int = 1


@dataclass(frozen=True)
class Pending:
    """A trial to place. Trials of one job with one ``structure`` may run fused; ``kind`` is what
    the cost model knows its template by (its sub-job), ``features`` its knob values, and
    ``fraction`` the share of its training it is expected to run (below 1 under early stopping).
    ``max_devices`` is the data-parallel degree its template allows."""

    trial: int
    job: int
    kind: str
    structure: str
    features: Mapping[str, float | int | str | bool] = field(default_factory=dict)
    fraction: float = 1.0
    max_devices: int = 1


@dataclass(frozen=True)
class Launch:
    """One unit of work of a plan: ``trials`` (one, or a fused group of one job and structure) on
    ``machine`` (None: the first with room, as a shared queue hands it out) with ``threads`` CPU
    threads (None: the machine's slot threads) and ``devices`` GPUs (0 on the CPU)."""

    trials: tuple[int, ...]
    machine: str | None = None
    threads: int | None = None
    devices: int = 0


#: A plan: its launches in the order they are to start.
Plan = tuple[Launch, ...]


@dataclass(frozen=True)
class Estimate:
    """What the cost model expects of a unit: its wall ``seconds`` and peak ``memory`` (bytes, 0
    when unknown), ``spread`` the standard deviation of its log seconds, ``measured`` False
    where no data of its kind exists and the figures are a guess."""

    seconds: float
    memory: float = 0.0
    spread: float = 0.0
    measured: bool = True
