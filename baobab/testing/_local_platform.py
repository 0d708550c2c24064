"""``baobab up`` as a child process: what the end-to-end tests, the demo and the benchmarks drive.

A child process rather than :class:`baobab._platform.Platform` in the caller's own
process: the caller then meets the platform only over HTTP, as a user does, and can
kill it without warning to test what a crash leaves behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["LocalPlatform"]


class LocalPlatform:
    """``baobab up --port 0 --workers N`` on ``home``, started again on the same home after a stop or kill.

    Args:
        home: ``BAOBAB_HOME``; its ``logs/baobab-up.log`` receives the platform's output.
        workers: trials at once.
        settings: more ``BAOBAB_*`` variables (``{"BAOBAB_DATABASE_URL": ...}``); the
            caller's own ``BAOBAB_*`` variables are not passed on.
    """

    def __init__(self, home: Path, *, workers: int = 2, settings: Mapping[str, str] | None = None) -> None:
        self.home = Path(home)
        self.workers = workers
        self.environ = {k: v for k, v in os.environ.items() if not k.startswith("BAOBAB_")}
        self.environ.update(settings or {}, BAOBAB_HOME=str(self.home))
        self.log = self.home / "logs" / "baobab-up.log"
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        """Start it and return its URL once it answers.

        Raises:
            RuntimeError: it exited first (the message points at its log).
        """
        if self._process is not None:
            raise RuntimeError("this platform is running already")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "baobab", "up", "--port", "0", "--workers", str(self.workers)]
        with self.log.open("a") as stderr:
            process = subprocess.Popen(command, env=self.environ, stdout=subprocess.PIPE, stderr=stderr, text=True)
        assert process.stdout is not None
        url = process.stdout.readline().strip()  # `baobab up` prints its URL alone, once it answers
        if not url.startswith("http"):
            process.wait()
            process.stdout.close()
            raise RuntimeError(f"baobab up exited with status {process.returncode}; see {self.log}")
        self._process, self.url = process, url
        return url

    def stop(self) -> int:
        """SIGTERM, as a service manager sends; returns the exit status."""
        return self._end(signal.SIGTERM)

    def kill(self) -> int:
        """SIGKILL, as a crash or a power cut: no clean-up runs."""
        return self._end(signal.SIGKILL)

    def _end(self, how: signal.Signals) -> int:
        process, self._process = self._process, None
        if process is None:
            raise RuntimeError("this platform is not running")
        process.send_signal(how)
        status = process.wait(timeout=120)
        assert process.stdout is not None
        process.stdout.close()
        return status

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> LocalPlatform:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self.stop()
