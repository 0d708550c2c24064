"""How every part exposes its Prometheus metrics, whether it runs in one process or in several.

Each part defines its metrics in a module of its own (``admin/_telemetry.py``,
``predictor/_telemetry.py``, ``advisor/driver/_telemetry.py``, ``worker/_telemetry.py``) on
prometheus_client's default registry. A Flask app answers ``GET /metrics`` with
:func:`exposition`; a process without an HTTP server (``baobab advisor``, ``baobab worker``)
gets a port of its own from :func:`serve`. In ``baobab up`` everything runs in the API's
process, so the API's ``/metrics`` shows the driver and the workers too.

Where one service answers from several processes (``baobab api`` under gunicorn, ``baobab
worker`` with Celery's prefork pool), a scrape reaches one of them, which must answer for all.
That is prometheus_client's multiprocess mode: each process keeps its values in files under
``PROMETHEUS_MULTIPROC_DIR``, and a scrape adds them up, the values of processes that died
included (so a counter does not go back when gunicorn or Celery replaces a process). The
variable is read when prometheus_client is imported, so the commands that fork call
:func:`enable_multiprocess` before anything imports it; for that reason this module imports
prometheus_client only inside its functions.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Response
    from flask.sansio.app import App
    from prometheus_client import CollectorRegistry

__all__ = ["MULTIPROC_DIR_ENV", "UNMATCHED", "enable_multiprocess", "exposition", "serve", "time_requests"]

#: prometheus_client's variable: the folder of the processes' value files, in multiprocess mode.
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: The route label of a request no route matched (a 404 or 405): one value, whatever the path.
UNMATCHED = "<unmatched>"
#: The methods that keep their name in a label; any other (a client may send any token) counts as OTHER.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_CLOCK = "baobab_request_clock"

#: What :func:`time_requests` hands on: the route (a URL rule such as ``/api/v1/trials/<int:trial_id>``,
#: or :data:`UNMATCHED`), the method, the status and the seconds the request took.
Observer = Callable[[str, str, int, float], None]


def enable_multiprocess() -> Path:
    """Put this process, and the processes it forks, in multiprocess mode; returns the folder of their values.

    The folder is ``$PROMETHEUS_MULTIPROC_DIR`` when it is set, emptied of the files of an
    earlier run (prometheus_client asks for that); else a new temporary folder, removed
    when this process exits.

    Raises:
        RuntimeError: prometheus_client was imported already; its values would stay per process.
    """
    if "prometheus_client" in sys.modules:
        raise RuntimeError(
            "enable_multiprocess() must run before prometheus_client is imported: "
            "call it before importing the part that defines the metrics"
        )
    given = os.environ.get(MULTIPROC_DIR_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            stale.unlink()
        return folder
    folder = Path(tempfile.mkdtemp(prefix="baobab-metrics-"))
    os.environ[MULTIPROC_DIR_ENV] = str(folder)
    atexit.register(_remove, folder, os.getpid())
    return folder


def _remove(folder: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked process inherits the handler; only the one that made the folder removes it
        shutil.rmtree(folder, ignore_errors=True)


def _registry() -> CollectorRegistry:
    """What a scrape of this process reads: every process's values in multiprocess mode, else this one's."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    if MULTIPROC_DIR_ENV not in os.environ:
        return REGISTRY
    merged = CollectorRegistry()
    MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
    return merged


def exposition() -> tuple[bytes, str]:
    """The body and content type of an answer to ``GET /metrics`` (Prometheus' text format)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(_registry()), CONTENT_TYPE_LATEST


def serve(port: int, host: str = "0.0.0.0") -> int:
    """Answer ``GET /metrics`` on ``host:port`` from a daemon thread; returns the port (``port=0``: a free one).

    Raises:
        OSError: the port cannot be listened on (taken by another process, say).
    """
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, addr=host, registry=_registry())
    except OSError as e:
        raise OSError(e.errno, f"cannot serve /metrics on {host}:{port}: {e.strerror or e}") from None
    return int(server.server_port)


def time_requests(app: App, observe: Observer) -> None:
    """Call ``observe(route, method, status, seconds)`` once for every request ``app`` answers, errors included.

    Labels built from these stay few, whatever clients send: the route is the URL rule, never
    the path (which holds names and ids), and an unknown method is ``OTHER``. The clock starts
    on Flask's ``request_started`` signal, before URL value preprocessors and
    ``before_request`` hooks, which may answer an error of their own (a 401, a 404).
    """
    from flask import g, request, request_started

    request_started.connect(_start_clock, app)

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.pop(_CLOCK, None)
        seconds = 0.0 if started is None else time.perf_counter() - started
        route = UNMATCHED if request.url_rule is None else request.url_rule.rule
        method = request.method if request.method in _METHODS else "OTHER"
        observe(route, method, response.status_code, seconds)
        return response


def _start_clock(sender: Any, **extra: Any) -> None:
    from flask import g

    setattr(g, _CLOCK, time.perf_counter())
