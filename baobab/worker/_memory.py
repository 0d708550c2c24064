"""A local worker's memory limit (one trial slot's share), and how a template that passes it is told.

The limit is ``RLIMIT_DATA``: the process's heap and private anonymous mappings, which is
where arrays and tensors live. Not ``RLIMIT_AS``: allocators, thread pools and CUDA
reserve address space they never touch, so a cap on it refuses programs that fit. GPU
memory is not counted. Past the limit an allocation fails inside the template (numpy
raises ``MemoryError``, torch a ``RuntimeError``) instead of the kernel's OOM killer
taking the whole worker, so the trial ends with a message that names the limit.
"""

from __future__ import annotations

import os
import resource

__all__ = ["default_memory_mb", "limit_memory", "out_of_memory"]

_MIB = 2**20
#: The default never goes below this: importing torch and pandas alone takes about 400 MiB.
_FLOOR_MB = 2048


def default_memory_mb(slots: int) -> int:
    """One slot's share of the machine's memory (at least 2 GiB), when ``BAOBAB_TRIAL_MEMORY_MB`` is not set."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(_FLOOR_MB, physical // _MIB // max(slots, 1))


def limit_memory(mb: int) -> None:
    """Cap this process's data (and its children's, which inherit it) at ``mb`` MiB."""
    limit = mb * _MIB
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def out_of_memory(error: BaseException) -> str | None:
    """What to tell the template's author when ``error`` is an allocation refused under this process's limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    if soft == resource.RLIM_INFINITY:
        return None
    refused = isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)  # torch's CPU allocator
    )
    if not refused:
        return None
    return f"exceeded the per-trial memory limit of {soft // _MIB} MiB (BAOBAB_TRIAL_MEMORY_MB)"
