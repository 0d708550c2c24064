"""A worker process as its starter (the local executor, a Celery pool process) sees it: start, talk, end it.

The process is ``python -m baobab.worker._process`` (see there for the messages),
started fresh (no fork of the executor's threads), as a
:class:`~baobab._contained.TemplateProcess`: in a PID namespace of its own, so that
killing it also kills whatever it started (data loader workers, a template's
subprocesses and daemons). Its stdout and stderr go to ``logs/worker-<index>.log``; a crash
report quotes the lines it wrote since its current trial started.

Its death is noticed without polling: the starter waits on the reply pipe (end of
file) and on a pidfd of the process (readable once it exits), next to its other
waits.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from baobab._contained import TemplateProcess, how_it_ended
from baobab.store import Launch

__all__ = ["WorkerProcess"]

#: A log file larger than this is renamed to ``*.log.1`` when its worker is next started.
_LOG_ROTATE_BYTES = 10 << 20
#: How much of its log a crash report quotes.
_TAIL_LINES = 20
_TAIL_BYTES = 16 << 10


def _rotate(log_path: Path) -> None:
    try:
        if log_path.stat().st_size > _LOG_ROTATE_BYTES:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    except FileNotFoundError:
        pass


class WorkerProcess:
    """A started worker process.

    The executor keeps the bookkeeping here: whether it said it is ready, the trials it
    runs (``trials``: one, or the members of a fused group not finished yet; ``fused``
    when it was given a group), when they must end (``deadline``, :func:`time.monotonic`),
    and where their output starts in the log (``log_offset``).

    Raises:
        OSError: the process cannot be started.
    """

    def __init__(self, index: int, *, env: Mapping[str, str], log_path: Path, args: Sequence[str] = ()) -> None:
        self.index = index
        self.log_path = log_path
        self.ready = False
        self.broken = False
        self.trials: list[int] = []
        self.fused = False
        #: The launch whose trials it runs, from its first trial on (it is confined to its user's folder,
        #: with its threads and memory).
        self.launch: Launch | None = None
        self.deadline: float | None = None
        self.log_offset = 0
        self.started = time.monotonic()
        commands_r, commands_w = multiprocessing.Pipe(duplex=False)
        replies_r, replies_w = multiprocessing.Pipe(duplex=False)
        command = [
            sys.executable, "-m", "baobab.worker._process", "--index", str(index),
            "--commands", str(commands_r.fileno()), "--replies", str(replies_w.fileno()), *args,
        ]  # fmt: skip
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            _rotate(log_path)
            with open(log_path, "ab") as log:
                log.write(f"--- worker {index} starting at {datetime.now(UTC).isoformat()} ---\n".encode())
                log.flush()
                self.process = TemplateProcess(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(commands_r.fileno(), replies_w.fileno()),
                    env=dict(env),
                )
        except BaseException:
            for connection in (commands_r, commands_w, replies_r, replies_w):
                connection.close()
            raise
        commands_r.close()
        replies_w.close()
        self.commands = commands_w
        self.replies = replies_r
        self.pidfd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(self.process.pid)
            except OSError:
                pass  # an old kernel: the executor checks on it at intervals instead
        self._eof = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def idle(self) -> bool:
        return self.ready and not self.broken and not self.trials

    def waitables(self) -> list[Any]:
        """What :func:`multiprocessing.connection.wait` should watch for this worker."""
        objects: list[Any] = [] if self._eof else [self.replies]
        if self.pidfd is not None:
            objects.append(self.pidfd)
        return objects

    def send(self, **message: Any) -> bool:
        """Send a message; False when the worker is gone (its death is handled where it is noticed)."""
        try:
            self.commands.send_bytes(json.dumps(message).encode())
        except OSError:
            self.broken = True
            return False
        return True

    def receive(self) -> list[dict[str, Any]]:
        """The messages that have arrived, without waiting."""
        messages = []
        try:
            while not self._eof and self.replies.poll():
                messages.append(json.loads(self.replies.recv_bytes()))
        except (EOFError, OSError):
            self._eof = True
        return messages

    def gone(self) -> bool:
        """Whether the process has exited (or closed its end of the pipe, which it does only when exiting)."""
        return self._eof or self._exited(0.0)

    def _exited(self, timeout: float) -> bool:
        # Without reaping it: until kill() reaps it, its pid (and so its process group's id)
        # cannot be given to another process, which TemplateProcess.kill() would then hit.
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], timeout)[0])
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self, *, grace: float = 0.0) -> None:
        """Kill the process and its group, reap it, and release the pipes.

        Args:
            grace: seconds to wait for a process that is exiting by itself first, so that
                its own exit status is the one kept.
        """
        if grace:
            self._exited(grace)
        self.process.end()
        self.commands.close()
        self.replies.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def let_go(self, grace_s: float) -> None:
        """Close its command pipe, which it takes as leave to exit (sending the outcome it holds first);
        then :meth:`kill` it once it has, or after ``grace_s`` seconds."""
        self.commands.close()
        self.kill(grace=grace_s)

    def how_it_ended(self) -> str:
        """'was killed by signal SIGKILL (out of memory?)', 'exited with status 3', ... (after :meth:`kill`)."""
        code = self.process.returncode
        if code is None:
            return "stopped answering"
        return how_it_ended(code) + (" (out of memory?)" if code == -signal.SIGKILL else "")

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self) -> str:
        """The last lines the worker wrote since ``log_offset`` (the start of its current trials)."""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self.log_offset, size - _TAIL_BYTES))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-_TAIL_LINES:])
