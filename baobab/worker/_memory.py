"""A worker process's memory limit (its launch's; by default a slot's share), and how a template past it is told.

The limit is ``RLIMIT_DATA``: the process's heap and private anonymous mappings, which is
where arrays and tensors live. Not ``RLIMIT_AS``: allocators, thread pools and CUDA
reserve address space they never touch, so a cap on it refuses programs that fit. GPU
memory is not counted. Past the limit an allocation fails inside the template (numpy
raises ``MemoryError``, torch a ``RuntimeError``) instead of the kernel's OOM killer
taking the whole worker, so the trial ends with a message that names the limit.

A worker process starts under the slot's share with room above it (the hard limit: the
machine's memory), because the launch it will serve may ask for more (a job's
``options.resources.memory_mb``). Its first unit of work fixes the limit for good
(:func:`fix_memory`: soft and hard alike), before any template code runs, so a template
cannot raise its own.
"""

from __future__ import annotations

import os
import resource

__all__ = ["default_memory_mb", "fix_memory", "limit_memory", "machine_memory_mb", "out_of_memory"]

_MIB = 2**20
#: The default never goes below this: importing torch and pandas alone takes about 400 MiB.
_FLOOR_MB = 2048


def machine_memory_mb() -> int:
    """The machine's physical memory, in MiB."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // _MIB


def default_memory_mb(slots: int) -> int:
    """One slot's share of the machine's memory (at least 2 GiB), when ``BAOBAB_TRIAL_MEMORY_MB`` is not set."""
    return max(_FLOOR_MB, machine_memory_mb() // max(slots, 1))


def limit_memory(mb: int, *, most_mb: int | None = None) -> None:
    """Cap this process's data (and its children's, which inherit it) at ``mb`` MiB, to be raised up to ``most_mb``."""
    most = max(mb, most_mb or mb) * _MIB
    resource.setrlimit(resource.RLIMIT_DATA, (mb * _MIB, most))


def fix_memory(mb: int) -> int:
    """Fix this process's data limit at ``mb`` MiB for good (no more than the room it has); the MiB it got."""
    _, most = resource.getrlimit(resource.RLIMIT_DATA)
    limit = mb * _MIB if most == resource.RLIM_INFINITY else min(mb * _MIB, most)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return limit // _MIB


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
    return (
        f"exceeded the per-trial memory limit of {soft // _MIB} MiB "
        "(the job's options.resources.memory_mb, else BAOBAB_TRIAL_MEMORY_MB)"
    )
