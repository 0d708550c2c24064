"""Cluster mode's services, one per process and each on any machine: what ``baobab api``,
``baobab advisor``, ``baobab worker`` and ``baobab predictor`` run.

Like :mod:`baobab._platform`, a composition root: the same parts as ``baobab up``,
wired to PostgreSQL (``BAOBAB_DATABASE_URL``), the broker (``BAOBAB_BROKER_URL``,
which also carries the events) and the shared artifact URL, instead of to each other.

It also decides how each service shows its Prometheus metrics (:mod:`baobab._prometheus`):
the API on its own ``/metrics``, adding up its gunicorn processes; the advisor, and the
worker adding up its Celery pool processes, on a port of their own. Each predictor answers
``/metrics`` on its own port, like ``/predict``.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from baobab._prometheus import enable_multiprocess, serve
from baobab._settings import Executor, Settings

__all__ = ["run_advisor", "run_api", "run_predictor_host", "run_worker"]

logger = logging.getLogger("baobab")

#: The longest an advisor waits between two reads of the store (they catch lost events).
_MAX_RESCAN_S = 30.0


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


def _events(settings: Settings) -> Any:
    from baobab.store import BrokerEventChannel

    if settings.broker_url is None:
        raise ValueError("cluster mode needs BAOBAB_BROKER_URL (the broker carries trials and events)")
    return BrokerEventChannel(settings.broker_url)


def run_api(settings: Settings, *, host: str, port: int, processes: int, threads: int) -> None:
    """Serve the admin API under gunicorn until SIGTERM; upgrades the schema first.

    ``/metrics`` adds up the values of every gunicorn process: whichever one a scrape reaches
    answers for all.
    """
    enable_multiprocess()  # before the admin's metrics are defined (in each gunicorn process, after the fork)
    from gunicorn.app.base import BaseApplication

    from baobab.admin import create_app
    from baobab.store import upgrade_database

    upgrade_database(settings.database_url)
    events = _events(settings)

    class _Application(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            options = {
                "bind": f"{host}:{port}",
                "workers": processes,
                "threads": threads,
                "worker_class": "gthread",
                "timeout": 120,
                "accesslog": None,
            }
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Callable[..., Any]:
            return create_app(settings, events)  # in each gunicorn process: its own engine

    _Application().run()


def run_advisor(settings: Settings, *, slots: int | None = None, metrics_port: int | None = None) -> None:
    """Drive train jobs on the Celery workers until SIGTERM (several advisors share the jobs by leases).

    Args:
        slots: trials at once over every job; by default what the workers report.
        metrics_port: where the driver's Prometheus metrics are served (any interface); None: nowhere.

    Raises:
        OSError: ``metrics_port`` cannot be listened on.
    """
    from baobab.advisor import JobDriver
    from baobab.store import create_engine_from_url
    from baobab.worker import CeleryExecutor

    engine = create_engine_from_url(settings.database_url)
    try:
        pool = _container_pool(settings, engine)  # trials still go through Celery; this runs the workers
    except Exception:
        engine.dispose()
        raise
    stop = _stop_on_signals()
    events = _events(settings)
    # The docker executor puts each job's trials on a queue of its own, consumed by that job's worker container.
    executor = CeleryExecutor(
        settings, events, engine=engine, slots=slots, job_queues=settings.executor is Executor.DOCKER
    )
    if pool is not None:
        threading.Thread(target=pool.run, args=(stop,), name="baobab-container-pool", daemon=True).start()
    rescan_s = max(0.5, min(_MAX_RESCAN_S, settings.heartbeat_timeout_s / 2))
    driver = JobDriver(engine, executor, events, settings, lease_s=settings.lease_s, rescan_s=rescan_s)
    logger.info("advisor %s: driving jobs (lease %g s, rescan %g s)", driver.name, settings.lease_s, rescan_s)
    try:
        if metrics_port is not None:  # once the settings are known to be right
            serve(metrics_port)
        driver.run(stop)
    finally:
        executor.close()
        events.close()
        engine.dispose()


def run_worker(
    settings: Settings,
    *,
    slots: int | None = None,
    gpus: Sequence[str] = (),
    queues: Sequence[str] = (),
    name: str | None = None,
    metrics_port: int | None = None,
) -> None:
    """Run trials sent through the broker until told to stop (see :func:`baobab.worker.run_worker` for the
    options); ``metrics_port``: where the metrics of every pool process are served, added up (any interface;
    None: nowhere).

    Raises:
        OSError: ``metrics_port`` cannot be listened on.
    """
    if metrics_port is not None:
        enable_multiprocess()  # before the worker's metrics are defined: the pool processes are forks of this one
    from baobab.worker import run_worker as run_celery_worker

    if metrics_port is not None:
        serve(metrics_port)
    run_celery_worker(settings, slots=slots, gpus=gpus, queues=queues, name=name)


def _container_pool(settings: Settings, engine: Any) -> Any:
    """The manager of worker and predictor containers (docker) or pods (kubernetes); ``None`` for celery.

    Raises:
        ValueError: a setting it needs is missing, or no Docker engine answers.
    """
    if settings.executor is Executor.DOCKER:
        import docker

        from baobab.worker import DockerPool, DockerPoolConfig

        config = DockerPoolConfig.from_settings(settings)
        try:
            client = docker.from_env()
            client.ping()
        except docker.errors.DockerException as e:
            raise ValueError(f"BAOBAB_EXECUTOR=docker: no Docker engine answers ({e}); is DOCKER_HOST right?") from e
        return DockerPool(engine, client, config, cpu_slots=settings.cpu_slots)
    if settings.executor is Executor.KUBERNETES:
        from baobab.worker import KubernetesPool, KubernetesPoolConfig, kubernetes_api

        pool = KubernetesPoolConfig.from_settings(settings)
        return KubernetesPool(engine, kubernetes_api(), pool, cpu_slots=settings.cpu_slots)
    return None


def run_predictor_host(
    settings: Settings, *, host: str, job_id: int | None = None, port: int = 0, advertise: str | None = None
) -> None:
    """Start, watch and stop the predictors of inference jobs on this machine (or of ``job_id``) until SIGTERM."""
    from baobab.predictor import InferenceSupervisor
    from baobab.store import create_engine_from_url

    stop = _stop_on_signals()
    engine = create_engine_from_url(settings.database_url)
    events = _events(settings)
    supervisor = InferenceSupervisor(
        engine,
        events,
        settings,
        host=host,
        job_ids=None if job_id is None else [job_id],
        port=port,
        advertise=advertise,
    )
    try:
        supervisor.run(stop)
    finally:
        supervisor.close()
        events.close()
        engine.dispose()
