"""Workers: the trial runner, the inference runner, and the executors that place them.

- :func:`run_trial` runs one trial in this process from its id (:func:`run_trials` a
  fused group of them), with the :class:`WorkerResources` (caches) a worker keeps across
  trials, reporting through :class:`ApiGateway` (the admin API, with the trial's token;
  a cluster worker's :class:`FinishRelay` sends an outcome with the next claim);
  a local worker also reads its trial's artifacts through it (:class:`TrialArtifacts`).
- :class:`DataCache` holds the preprocessed datasets of TorchModel templates in
  memory-mapped files that the trials of a machine share, each decoded once.
- :class:`LocalExecutor` runs trials in worker processes on this machine
  (``python -m baobab.worker._process``), with time limits, crash reports and
  cancellation, and implements :class:`baobab.advisor.Executor`.
- :class:`CeleryExecutor` sends trials to ``baobab worker`` processes on any machine
  through Celery (:mod:`baobab.worker._celery`).
- :class:`DockerPool` and :class:`KubernetesPool` run those workers and the predictors
  as containers or pods, as the running jobs ask (``BAOBAB_EXECUTOR=docker`` or
  ``kubernetes``; trials still travel through Celery).
- :class:`InferenceWorker` serves one trained trial's predictions in a process of its
  own (the predictor's members), :class:`FusedInferenceWorker` several of one structure
  in one stacked forward pass; :func:`run_child` runs one :class:`TrialSpec` in a
  child process (``python -m baobab.worker._trial_process``), as ``baobab dev`` does.
- :func:`measure_inventory` tells what a worker machine has (cores, memory, the GPUs it
  was given); the executors keep it in the store (``workers``), where the admin API checks
  a job's resources against it.

Names are imported on first use: a process started as ``python -m
baobab.worker._inference`` imports this package first, and should not pay for
SQLAlchemy and the executor it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baobab.worker._celery import CeleryExecutor, run_worker
    from baobab.worker._child_process import ChildOutcome, run_child
    from baobab.worker._data_cache import DataCache
    from baobab.worker._docker import DockerPool, DockerPoolConfig
    from baobab.worker._fused_inference import FusedInferenceWorker
    from baobab.worker._gateway import ApiGateway, FinishRelay, TrialArtifacts, TrialGateway
    from baobab.worker._inference import InferenceSpec, InferenceWorker, InferenceWorkerError
    from baobab.worker._inventory import measure_inventory
    from baobab.worker._kubernetes import KubernetesPool, KubernetesPoolConfig, kubernetes_api
    from baobab.worker._local import LocalExecutor
    from baobab.worker._queries import sample_queries
    from baobab.worker._runner import TrialOutcome, WorkerResources, run_trial, run_trials
    from baobab.worker._trial_process import TrialFailed, TrialSpec, trial_seed

_NAMES = {
    "ApiGateway": "baobab.worker._gateway",
    "CeleryExecutor": "baobab.worker._celery",
    "run_worker": "baobab.worker._celery",
    "ChildOutcome": "baobab.worker._child_process",
    "run_child": "baobab.worker._child_process",
    "DataCache": "baobab.worker._data_cache",
    "TrialArtifacts": "baobab.worker._gateway",
    "FinishRelay": "baobab.worker._gateway",
    "DockerPool": "baobab.worker._docker",
    "DockerPoolConfig": "baobab.worker._docker",
    "FusedInferenceWorker": "baobab.worker._fused_inference",
    "InferenceSpec": "baobab.worker._inference",
    "InferenceWorker": "baobab.worker._inference",
    "InferenceWorkerError": "baobab.worker._inference",
    "measure_inventory": "baobab.worker._inventory",
    "KubernetesPool": "baobab.worker._kubernetes",
    "KubernetesPoolConfig": "baobab.worker._kubernetes",
    "kubernetes_api": "baobab.worker._kubernetes",
    "TrialGateway": "baobab.worker._gateway",
    "LocalExecutor": "baobab.worker._local",
    "sample_queries": "baobab.worker._queries",
    "TrialOutcome": "baobab.worker._runner",
    "WorkerResources": "baobab.worker._runner",
    "run_trial": "baobab.worker._runner",
    "run_trials": "baobab.worker._runner",
    "TrialFailed": "baobab.worker._trial_process",
    "TrialSpec": "baobab.worker._trial_process",
    "trial_seed": "baobab.worker._trial_process",
}

__all__ = [
    "ApiGateway",
    "FinishRelay",
    "CeleryExecutor",
    "ChildOutcome",
    "DataCache",
    "DockerPool",
    "DockerPoolConfig",
    "FusedInferenceWorker",
    "InferenceSpec",
    "InferenceWorker",
    "InferenceWorkerError",
    "KubernetesPool",
    "KubernetesPoolConfig",
    "LocalExecutor",
    "TrialArtifacts",
    "TrialFailed",
    "TrialGateway",
    "TrialOutcome",
    "TrialSpec",
    "WorkerResources",
    "kubernetes_api",
    "measure_inventory",
    "run_child",
    "run_trial",
    "run_trials",
    "run_worker",
    "sample_queries",
    "trial_seed",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
