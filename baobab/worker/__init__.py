"""Workers: the trial runner, the inference runner, and the executors that place them.

- :func:`run_trial` runs one trial in this process from its id, with the
  :class:`WorkerResources` (caches) a worker keeps across trials, reporting through
  :class:`ApiGateway` (the admin API, with the trial's token); a local worker also
  reads its trial's artifacts through it (:class:`TrialArtifacts`).
- :class:`LocalExecutor` runs trials in worker processes on this machine
  (``python -m baobab.worker._process``), with time limits, crash reports and
  cancellation, and implements :class:`baobab.advisor.Executor`.
- :class:`CeleryExecutor` sends trials to ``baobab worker`` processes on any machine
  through Celery (:mod:`baobab.worker._celery`).
- :class:`DockerPool` and :class:`KubernetesPool` run those workers and the predictors
  as containers or pods, as the running jobs ask (``BAOBAB_EXECUTOR=docker`` or
  ``kubernetes``; trials still travel through Celery).

Names are imported on first use: a process started as ``python -m
baobab.worker._inference`` imports this package first, and should not pay for
SQLAlchemy and the executor it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baobab.worker._celery import CeleryExecutor
    from baobab.worker._docker import DockerPool, DockerPoolConfig
    from baobab.worker._gateway import ApiGateway, TrialArtifacts, TrialGateway
    from baobab.worker._kubernetes import KubernetesPool, KubernetesPoolConfig
    from baobab.worker._local import LocalExecutor
    from baobab.worker._runner import TrialOutcome, WorkerResources, run_trial

_NAMES = {
    "ApiGateway": "baobab.worker._gateway",
    "CeleryExecutor": "baobab.worker._celery",
    "TrialArtifacts": "baobab.worker._gateway",
    "DockerPool": "baobab.worker._docker",
    "DockerPoolConfig": "baobab.worker._docker",
    "KubernetesPool": "baobab.worker._kubernetes",
    "KubernetesPoolConfig": "baobab.worker._kubernetes",
    "TrialGateway": "baobab.worker._gateway",
    "LocalExecutor": "baobab.worker._local",
    "TrialOutcome": "baobab.worker._runner",
    "WorkerResources": "baobab.worker._runner",
    "run_trial": "baobab.worker._runner",
}

__all__ = [
    "ApiGateway",
    "CeleryExecutor",
    "DockerPool",
    "DockerPoolConfig",
    "KubernetesPool",
    "KubernetesPoolConfig",
    "LocalExecutor",
    "TrialArtifacts",
    "TrialGateway",
    "TrialOutcome",
    "WorkerResources",
    "run_trial",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
