"""Cluster mode's services, one per process and each on any machine: what ``baobab api``,
``baobab advisor`` and ``baobab predictor`` run (``baobab worker`` is
:func:`baobab.worker._celery.run_worker`).

Like :mod:`baobab._platform`, a composition root: the same parts as ``baobab up``,
wired to PostgreSQL (``BAOBAB_DATABASE_URL``), the broker (``BAOBAB_BROKER_URL``,
which also carries the events) and the shared artifact URL, instead of to each other.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from baobab._settings import Settings

__all__ = ["run_advisor", "run_api", "run_predictor_host"]

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
    """Serve the admin API under gunicorn until SIGTERM; upgrades the schema first."""
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


def run_advisor(settings: Settings, *, slots: int | None = None) -> None:
    """Drive train jobs on the Celery workers until SIGTERM (several advisors share the jobs by leases)."""
    from baobab.advisor import JobDriver
    from baobab.store import create_engine_from_url
    from baobab.worker import CeleryExecutor

    stop = _stop_on_signals()
    engine = create_engine_from_url(settings.database_url)
    events = _events(settings)
    executor = CeleryExecutor(settings, events, engine=engine, slots=slots)
    if settings.executor == "kubernetes":  # trials still go through Celery; this sizes the worker pods
        from baobab.worker._kubernetes import KubernetesPool, KubernetesPoolConfig, kubernetes_api

        pool = KubernetesPool(engine, kubernetes_api(), KubernetesPoolConfig.from_env(), cpu_slots=settings.cpu_slots)
        threading.Thread(target=pool.run, args=(stop,), name="baobab-kubernetes-pool", daemon=True).start()
    rescan_s = max(0.5, min(_MAX_RESCAN_S, settings.heartbeat_timeout_s / 2))
    driver = JobDriver(engine, executor, events, settings, lease_s=settings.lease_s, rescan_s=rescan_s)
    logger.info("advisor %s: driving jobs (lease %g s, rescan %g s)", driver.name, settings.lease_s, rescan_s)
    try:
        driver.run(stop)
    finally:
        executor.close()
        events.close()
        engine.dispose()


def run_predictor_host(settings: Settings, *, host: str) -> None:
    """Start, watch and stop the predictors of inference jobs on this machine until SIGTERM."""
    from baobab.predictor import InferenceSupervisor
    from baobab.store import create_engine_from_url

    stop = _stop_on_signals()
    engine = create_engine_from_url(settings.database_url)
    events = _events(settings)
    supervisor = InferenceSupervisor(engine, events, settings, host=host)
    try:
        supervisor.run(stop)
    finally:
        supervisor.close()
        events.close()
        engine.dispose()
