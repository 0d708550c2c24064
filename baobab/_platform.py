"""The whole platform in one process: what ``baobab up`` runs.

This is the composition root, the one module that imports every part (nothing else
imports the admin API). One process holds the admin API served by waitress, the job
driver thread, the local executor with its worker processes, and the inference
supervisor thread with its predictor processes; they wake each other through one
:class:`~baobab.store.LocalEventChannel`. The cluster mode runs the same parts in
separate processes and swaps the executor, the database URL and the event channel.

Stopping leaves the store as it is: trials that were running are found lost by the
next start and run again, so stopping and starting is always safe.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from baobab._settings import Settings

__all__ = ["Platform"]

logger = logging.getLogger("baobab")

#: How long ``start`` waits for the API to answer before it gives up.
_START_TIMEOUT_S = 60.0
#: waitress threads: requests are short, but uploads and long polls hold one each.
_API_THREADS = 8


@dataclass
class Platform:
    """The admin API, job driver, local executor and inference supervisor on one machine.

    Args:
        settings: the configuration (database, artifacts, home, slots).
        host: the interface the API and the predictors listen on.
        port: the API's port; 0 picks a free one (see :attr:`url` after :meth:`start`).
        workers: how many trials run at once (worker processes).
    """

    settings: Settings
    host: str = "127.0.0.1"
    port: int = 8100
    workers: int = 2
    url: str = ""
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _threads: list[threading.Thread] = field(default_factory=list, repr=False)
    _parts: dict[str, Any] = field(default_factory=dict, repr=False)

    def start(self) -> str:
        """Upgrade the database, start every part, and return the API's URL once it answers."""
        import waitress

        from baobab.admin import create_app
        from baobab.advisor import JobDriver
        from baobab.predictor import InferenceSupervisor
        from baobab.store import LocalEventChannel, upgrade_database
        from baobab.worker import LocalExecutor

        self.settings.check()
        self.settings.home.mkdir(parents=True, exist_ok=True)
        upgrade_database(self.settings.database_url)
        events = LocalEventChannel()
        app = create_app(self.settings, events)
        engine = app.extensions["baobab"].engine  # one connection pool for every part
        self._parts["engine"] = engine
        try:
            # Our own socket map: stopping closes the idle keep-alive connections in it too,
            # which would otherwise keep the server's loop (and the shutdown) waiting.
            sockets: dict[int, Any] = {}
            server = waitress.create_server(app, map=sockets, host=self.host, port=self.port, threads=_API_THREADS)
            self._parts["server"] = server
            self._parts["sockets"] = sockets
            # A wildcard address is where it listens, not where a client connects.
            shown = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
            self.url = f"http://{shown}:{server.effective_port}"
            # The workers report through the API (they hold no database); it answers once it runs.
            executor = LocalExecutor(self.settings, events, api_url=self.url, workers=self.workers, engine=engine)
            self._parts["executor"] = executor
            driver = JobDriver(engine, executor, events, self.settings)
            supervisor = InferenceSupervisor(engine, events, self.settings, host=self.host)
            self._parts["supervisor"] = supervisor
            self._spawn("baobab-driver", driver.run, self._stop)
            self._spawn("baobab-supervisor", supervisor.run, self._stop)
            self._spawn("baobab-api", server.run)
            self._wait_until_answering()
        except BaseException:
            self.stop()
            raise
        return self.url

    def wait(self) -> None:
        """Block until :meth:`request_stop` is called or a part dies; then call :meth:`stop`."""
        self._stop.wait()

    def request_stop(self) -> None:
        """Make :meth:`wait` return; safe in a signal handler (it only sets a flag)."""
        self._stop.set()

    def stop(self) -> None:
        """Stop serving and release every process; safe to call twice."""
        self._stop.set()
        server = self._parts.pop("server", None)
        if server is not None:
            from waitress import wasyncore

            server.task_dispatcher.shutdown()  # lets requests in progress finish
            wasyncore.close_all(self._parts.pop("sockets"))
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=30)
        self._threads.clear()
        for name in ("supervisor", "executor"):
            part = self._parts.pop(name, None)
            if part is not None:
                part.close()
        engine = self._parts.pop("engine", None)
        if engine is not None:
            engine.dispose()

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=self._guard, args=(name, target, *args), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guard(self, name: str, target: Any, *args: Any) -> None:
        """Run a part; if it dies, say so and stop the platform rather than limp on without it."""
        try:
            target(*args)
        except Exception:
            logger.exception("%s stopped on an error; stopping the platform", name)
            self._stop.set()

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._stop.is_set():
                raise RuntimeError("the platform stopped while starting; see the log above")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v1/openapi.json", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError):
                self._stop.wait(0.05)
        raise RuntimeError(f"the API at {self.url} did not answer within {_START_TIMEOUT_S:.0f} s")
