"""What a fusion profile measured (:func:`baobab.model.profile_fusion` fills it).

Apart from the measuring, so that a worker answers a profile request for a template
that is no TorchModel ("trains alone") without importing torch, which takes seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FusionProfile"]


@dataclass(frozen=True)
class FusionProfile:
    """What :func:`~baobab.model.profile_fusion` measured: training rows per second by group size, and the size
    to use."""

    #: Group size → rows per second of all members together (1: the unfused loop).
    samples_per_s: dict[int, float]
    best: int
    seconds: float
    #: Why the sizes stopped below the largest asked for, or why the model cannot fuse; None when none stopped them.
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        rates = {str(k): round(v, 1) for k, v in self.samples_per_s.items()}
        return {"samples_per_s": rates, "best": self.best, "seconds": round(self.seconds, 3), "reason": self.reason}
