"""What a worker process applies of the launch it serves: its threads and its memory, before any template runs.

A worker process serves one launch (:class:`baobab.store.Launch`: a user, threads, memory),
fixed by its first unit of work; the executor sends it only units of that launch afterwards.
Threads are set three ways, since libraries read them at different times: the variables
that a library loaded later reads (``OMP_NUM_THREADS`` and its kin, as
:func:`baobab._sandbox.template_env` sets them at start), threadpoolctl for the pools
loaded already (numpy's BLAS), and torch's own intra-op pool when torch is in the process.
"""

from __future__ import annotations

import os
import sys

from threadpoolctl import threadpool_limits

from baobab._sandbox import THREAD_VARIABLES
from baobab.store import Launch
from baobab.worker._memory import fix_memory

__all__ = ["take_launch"]


def take_launch(launch: Launch, *, memory_mb: int) -> tuple[int | None, int]:
    """Give this process ``launch``'s threads (None: keep the slot's, set at start) and memory (None:
    ``memory_mb``, the slot's share) for good; the threads and the MiB it got."""
    threads = launch.threads
    if threads is not None:
        os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
        threadpool_limits(limits=threads)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads)
    return threads, fix_memory(launch.memory_mb or memory_mb)
