"""What a worker machine has (cores, memory, GPUs, trial slots), and what one launch of trials is given.

No database import here: workers measure their machine, and read a launch, with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Gpu", "Inventory", "Launch"]


@dataclass(frozen=True)
class Gpu:
    """One GPU of a machine: its index there, its name and its memory (0: not known)."""

    index: int
    name: str
    memory_mb: int


@dataclass(frozen=True)
class Inventory:
    """What one worker machine has, and the trials it runs at once (``slots``)."""

    slots: int
    cores: int
    memory_mb: int
    gpus: tuple[Gpu, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "slots": self.slots,
            "cores": self.cores,
            "memory_mb": self.memory_mb,
            "gpus": [{"index": g.index, "name": g.name, "memory_mb": g.memory_mb} for g in self.gpus],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Inventory:
        """An inventory as :meth:`to_json` wrote it (a worker's answer, or a stored row's parts).

        Raises:
            ValueError: a field is missing or not a whole number.
        """
        try:
            gpus = tuple(Gpu(int(g["index"]), str(g["name"]), int(g["memory_mb"])) for g in data.get("gpus") or ())
            return cls(int(data["slots"]), int(data["cores"]), int(data["memory_mb"]), gpus)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a worker inventory: {data!r} ({e})") from None


@dataclass(frozen=True)
class Launch:
    """Whom a unit of work (a trial, or a fused group) runs for, and what it was given.

    A worker process serves one launch: its user's folder (the sandbox), ``threads`` for every
    numeric library's pool and ``memory_mb`` of data, fixed before any template code runs in
    it. ``None`` is the slot's share, what the executor gives when the job asks for nothing
    (the job's ``options.resources``). Units with the same launch reuse a worker process; a
    unit with another waits for one of its own.
    """

    owner: int
    threads: int | None = None
    memory_mb: int | None = None

    def to_json(self) -> dict[str, int | None]:
        return {"owner": self.owner, "threads": self.threads, "memory_mb": self.memory_mb}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Launch:
        def whole(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        return cls(int(data["owner"]), whole("threads"), whole("memory_mb"))
