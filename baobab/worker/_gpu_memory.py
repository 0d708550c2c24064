"""What a trial's GPU held: the peak of its process's CUDA allocator, and the device's memory.

The driver decides from it how many of a job's trials may share a GPU
(:mod:`baobab.advisor._gpu_share`). Nothing is measured in a process whose templates never
touched CUDA: torch is not imported for it, and its context is never created.
"""

from __future__ import annotations

import sys

__all__ = ["gpu_memory", "reset_gpu_peak"]

_MIB = 2**20


def _cuda() -> object | None:
    """torch.cuda, when a template imported torch and CUDA was started in this process."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return torch.cuda


def reset_gpu_peak() -> None:
    """A trial starts: the peak it will be measured by is its own, not an earlier trial's of this process."""
    cuda = _cuda()
    if cuda is not None:
        cuda.reset_peak_memory_stats()  # type: ignore[attr-defined]


def gpu_memory() -> dict[str, int] | None:
    """``{"peak_mb", "total_mb"}``: the most the allocator held from the device since the last reset (what
    it reserved, cached blocks included: what another process could not have), and the device's memory."""
    cuda = _cuda()
    if cuda is None:
        return None
    peak = cuda.max_memory_reserved()  # type: ignore[attr-defined]
    total = cuda.get_device_properties(cuda.current_device()).total_memory  # type: ignore[attr-defined]
    return {"peak_mb": -(-int(peak) // _MIB), "total_mb": int(total) // _MIB}
