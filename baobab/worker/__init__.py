"""Workers: the trial runner, the inference runner, and the executors that place them.

- :func:`run_trial` runs one trial in this process from its id, with the
  :class:`WorkerResources` (database, artifacts, caches) a worker keeps across trials;
  any executor's worker (local processes, a Celery task) calls it.
- :class:`LocalExecutor` runs trials in worker processes on this machine
  (``python -m baobab.worker._process``), with time limits, crash reports and
  cancellation, and implements :class:`baobab.advisor.Executor`.

Names are imported on first use: a process started as ``python -m
baobab.worker._inference`` imports this package first, and should not pay for
SQLAlchemy and the executor it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baobab.worker._local import LocalExecutor
    from baobab.worker._runner import TrialOutcome, WorkerResources, params_key, run_trial

_NAMES = {
    "LocalExecutor": "baobab.worker._local",
    "TrialOutcome": "baobab.worker._runner",
    "WorkerResources": "baobab.worker._runner",
    "params_key": "baobab.worker._runner",
    "run_trial": "baobab.worker._runner",
}

__all__ = ["LocalExecutor", "TrialOutcome", "WorkerResources", "params_key", "run_trial"]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
