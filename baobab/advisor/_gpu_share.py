"""How many of a GPU job's trials share each of its GPUs, decided by what the trials measured.

``GPU_COUNT`` stays what the user asked for: the GPUs a job may hold. Under the job option
``resources.gpu_share: "auto"`` several of its trials may run on each of them, as separate
processes, the way one trial per GPU leaves most of a small model's GPU idle. The level (trials
per GPU) starts at 1 and doubles while both hold:

- **memory**: twice the level times the largest peak a trial of the job reported (its CUDA
  allocator's peak plus a context's worth, :data:`CONTEXT_MB`), with a :data:`MARGIN`, fits in
  :data:`DEVICE_SHARE` of the device's memory;
- **throughput**: the trials that ran wholly at the level finished at least :data:`GAIN` times as
  many per second as those of the level below (how many over the span from the first one's
  start to the last one's end: trials that an executor ran one after another, a Celery GPU
  worker's single pool process, gain nothing by it).

Only trials that started and ended while the level stood are measured at it (an ``epoch`` tells
them apart), so a change never judges itself by trials of the level before. The first level
that does not pay settles the job one level down for good, and a trial that runs out of GPU
memory while sharing settles it one level down too: that trial is run again alone, and is no
template error. Every change and its reason is kept in :attr:`GpuShare.record`, which the job
stores and its API JSON shows.

Sharing is per job: trials of other jobs are placed as before. A driver that takes a job up again
(a restart, another advisor) starts from the level stored, and submits a trial that waited to run
alone as it submits any lost trial.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CONTEXT_MB", "DEVICE_SHARE", "GAIN", "MARGIN", "MAX_LEVEL", "GpuShare", "is_gpu_out_of_memory"]

#: The most trials a GPU is shared by.
MAX_LEVEL = 8
#: What a level's trials together must beat the level below by, to move up.
GAIN = 1.15
#: Room kept above the peaks measured, per trial.
MARGIN = 1.25
#: The share of a device's memory the job's trials may fill together.
DEVICE_SHARE = 0.9
#: MiB a process's CUDA context takes beyond what its allocator reports.
CONTEXT_MB = 512
#: How CUDA's allocator words running out (PyTorch's ``torch.OutOfMemoryError``).
_OOM_MARKS = ("CUDA out of memory", "OutOfMemoryError")


def is_gpu_out_of_memory(error: str | None) -> bool:
    """Whether a trial's error is its GPU's memory running out (no fault of its template)."""
    return error is not None and any(mark in error for mark in _OOM_MARKS)


@dataclass
class GpuShare:
    """The level of one job and what it learnt on the way; see the module."""

    gpus: int
    level: int = 1
    settled: bool = False
    #: Bumped with every change of level: a trial is measured at a level only if its epoch is still current.
    epoch: int = 0
    #: (start, end) of the trials that ran wholly at each level, in the driver's clock.
    runs: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    #: The largest GPU memory a trial of the job needed (MiB, context included), and its device's total.
    peak_mb: float = 0.0
    device_mb: float | None = None
    #: The changes, each with its reason (the newest last), and the trials run again alone.
    changes: list[dict[str, Any]] = field(default_factory=list)
    retried: list[int] = field(default_factory=list)
    #: Trials that ran out of memory beside others, waiting to run alone one after another, and the one that does.
    waiting_alone: list[int] = field(default_factory=list)
    alone: int | None = None

    @classmethod
    def from_record(cls, gpus: int, record: Mapping[str, Any] | None) -> GpuShare:
        """The share a job's stored record (:attr:`record`) left it at, for a driver that takes it up again: the
        level and what was measured stay, the runs are measured anew."""
        share = cls(gpus=gpus)
        if record:
            share.level = int(record.get("level", 1))
            share.settled = bool(record.get("settled", False))
            share.peak_mb = float(record.get("peak_mb") or 0)
            share.device_mb = None if record.get("device_mb") is None else float(record["device_mb"])
            share.changes = list(record.get("changes", []))
            share.retried = list(record.get("retried_alone", []))
        return share

    @property
    def cap(self) -> int:
        """The trials the job may run at once: one while a trial runs alone."""
        return 1 if self.alone is not None or self.waiting_alone else self.gpus * self.level

    def started(self) -> int:
        """A trial starts now: the epoch it runs in."""
        return self.epoch

    def finished(
        self, epoch: int, ran: tuple[float, float] | None, memory: Mapping[str, Any] | None, *, completed: bool
    ) -> bool:
        """A trial started in ``epoch`` ended, having run from ``ran[0]`` to ``ran[1]`` (None: it never ran); True
        when something was decided (:attr:`changes` grew)."""
        if memory:
            peak = memory.get("peak_mb")
            if isinstance(peak, int | float):
                self.peak_mb = max(self.peak_mb, float(peak) + CONTEXT_MB)
            total = memory.get("total_mb")
            if isinstance(total, int | float) and total > 0:
                self.device_mb = float(total) if self.device_mb is None else min(self.device_mb, float(total))
        if completed and ran is not None and ran[1] > ran[0] and epoch == self.epoch:
            self.runs.setdefault(self.level, []).append(ran)
        decided = len(self.changes)
        self._decide()
        return len(self.changes) > decided

    def out_of_memory(self, trial_id: int, epoch: int | None) -> None:
        """A trial started in ``epoch`` ran out of GPU memory beside others of the job: it runs again alone, and the
        level goes one down for good (once for all the trials of the level that ran out)."""
        self.retried.append(trial_id)
        self.waiting_alone.append(trial_id)
        if epoch == self.epoch and self.level > 1:
            self._change(self.level // 2, f"trial {trial_id} ran out of GPU memory at {self.level} per GPU")
            self.settled = True

    def next_alone(self, running: int) -> int | None:
        """The trial to submit now to run alone, when the job's ``running`` trials are only those waiting to."""
        if self.alone is not None or not self.waiting_alone or running > len(self.waiting_alone):
            return None
        self.alone = self.waiting_alone.pop(0)
        return self.alone

    def ended(self, trial_id: int) -> None:
        """A trial of the job reached its final state (a waiting one too: cancelled when the job stopped)."""
        if self.alone == trial_id:
            self.alone = None
        if trial_id in self.waiting_alone:
            self.waiting_alone.remove(trial_id)

    def _fits(self, level: int) -> bool:
        if self.device_mb is None or self.peak_mb <= 0:
            return False
        return level * self.peak_mb * MARGIN <= self.device_mb * DEVICE_SHARE

    def _rate(self, level: int) -> float:
        """Trials a second at ``level``: those measured over the span they ran in."""
        runs = self.runs[level]
        return len(runs) / (max(end for _, end in runs) - min(start for start, _ in runs))

    def _decide(self) -> None:
        level = self.level
        if self.settled or len(self.runs.get(level, ())) < level:
            return
        if level > 1 and self.runs.get(level // 2):
            gain = self._rate(level) / self._rate(level // 2)
            if gain < GAIN:
                self._change(level // 2, f"{level} per GPU ran {gain:.2f}x as fast as {level // 2}; below {GAIN}x")
                self.settled = True
                return
            paid = f"{level} per GPU ran {gain:.2f}x as fast as {level // 2}"
        else:  # the first level measured (one per GPU, or the level a job was taken up again at)
            paid = f"{level} per GPU measured" if level > 1 else "one per GPU measured"
        if level * 2 > MAX_LEVEL:
            self.settled = True
            self.changes.append({"level": level, "reason": f"{paid}; {MAX_LEVEL} per GPU is the most"})
            return
        if not self._fits(level * 2):
            self.settled = True
            need = level * 2 * self.peak_mb * MARGIN
            held = f"{self.device_mb:.0f} MiB" if self.device_mb else "no GPU memory reported"
            reason = f"{paid}; {level * 2} per GPU would need {need:.0f} MiB of {held}"
            self.changes.append({"level": level, "reason": reason})
            return
        self._change(level * 2, paid)

    def _change(self, level: int, reason: str) -> None:
        self.level = level
        self.epoch += 1
        self.changes.append({"level": level, "reason": reason})

    @property
    def record(self) -> dict[str, Any]:
        """What the job stores and shows (JSON)."""
        return {
            "level": self.level,
            "settled": self.settled,
            "peak_mb": round(self.peak_mb),
            "device_mb": None if self.device_mb is None else round(self.device_mb),
            "changes": list(self.changes),
            "retried_alone": list(self.retried),
        }
