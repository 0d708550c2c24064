"""What a worker machine has, measured where it runs: the cores it may use, its memory, the GPUs it was given.

GPUs are named and sized by ``nvidia-smi`` (no CUDA library loads in the process that
asks); a GPU the worker was given where ``nvidia-smi`` cannot tell is reported with
memory 0, not left out: the worker was told it has it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence

from baobab.store import Gpu, Inventory
from baobab.worker._memory import machine_memory_mb

__all__ = ["measure_inventory"]

logger = logging.getLogger(__name__)

_QUERY = ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits")


def measure_inventory(slots: int, gpus: Sequence[int] = ()) -> Inventory:
    """This machine as a worker with ``slots`` trials at once and the GPUs of indices ``gpus``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    known = _nvidia_gpus() if gpus else {}
    given = tuple(Gpu(index, *known.get(index, ("unknown", 0))) for index in gpus)
    return Inventory(slots=slots, cores=cores, memory_mb=machine_memory_mb(), gpus=given)


def _nvidia_gpus() -> dict[int, tuple[str, int]]:
    """index -> (name, MiB) of the GPUs ``nvidia-smi`` lists; empty where it is missing or fails."""
    try:
        out = subprocess.run(_QUERY, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        logger.info("nvidia-smi cannot tell this machine's GPUs (%s): their memory is reported as 0", e)
        return {}
    found: dict[int, tuple[str, int]] = {}
    for line in out.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and parts[2].isdigit():
            found[int(parts[0])] = (parts[1], int(parts[2]))
    return found
