"""The parent's side of a child trial: start it, relay its messages, enforce deadlines.

See :mod:`baobab.worker._trial_process` for the child's side and the messages.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from baobab._contained import TemplateProcess, how_it_ended
from baobab.worker._trial_process import TrialSpec

__all__ = ["ChildOutcome", "run_child"]

#: How many lines of the child's output a crash report quotes.
_LOG_TAIL_LINES = 15
#: How long a child whose pipe closed may take to exit before it is killed.
_EXIT_GRACE_S = 10.0


@dataclass(frozen=True)
class ChildOutcome:
    """How a child ended: its ``result`` message, or ``error`` saying why there is none.

    ``invalid``: the error is the template's verdict that its architecture cannot be
    built (an INVALID trial), not a failure.
    """

    result: dict[str, Any] | None
    error: str | None
    timed_out: bool = False
    invalid: bool = False


def _pump(stream: IO[bytes], messages: queue.Queue[dict[str, Any] | None]) -> None:
    for line in stream:
        try:
            messages.put(json.loads(line))
        except ValueError:
            continue  # not a message: nothing but the child writes to this pipe
    messages.put(None)


def _log_tail(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    return "\n".join(lines)


def _crash_message(returncode: int, log_path: Path) -> str:
    message = f"the trial process {how_it_ended(returncode)} before reporting a result"
    tail = _log_tail(log_path)
    return f"{message}; its last output ({log_path}):\n{tail}" if tail else message


def run_child(
    spec: TrialSpec,
    spec_path: Path,
    log_path: Path,
    *,
    deadline: float | None = None,
    stop_at: float | None = None,
    on_event: Callable[[dict[str, Any]], None] = lambda event: None,
) -> ChildOutcome:
    """Run ``spec`` in a new Python process (a :class:`~baobab._contained.TemplateProcess`) and wait for its result.

    Args:
        spec: what to run; written to ``spec_path`` (the child's only argument).
        log_path: receives what the child prints (stdout and stderr).
        deadline: a :func:`time.monotonic` time at which the child is killed.
        stop_at: a monotonic time at which the child is asked to stop early.
        on_event: called, in this thread, with each metric or log message.
    """
    spec_path.write_text(spec.to_json())
    with log_path.open("wb") as log:
        process = TemplateProcess(
            [sys.executable, "-m", "baobab.worker._trial_process", str(spec_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
    assert process.stdin is not None and process.stdout is not None
    messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(process.stdout, messages), daemon=True)
    reader.start()
    final: dict[str, Any] | None = None
    timed_out = closed = False
    try:
        while True:
            now = time.monotonic()
            if stop_at is not None and now >= stop_at:
                stop_at = None
                try:
                    process.stdin.write(b"stop\n")
                    process.stdin.flush()
                except OSError:
                    pass  # it is exiting already
            if deadline is not None and now >= deadline:
                timed_out = True
                break
            wake = min(t for t in (deadline, stop_at, now + 3600.0) if t is not None)
            try:
                message = messages.get(timeout=max(wake - now, 0.0))
            except queue.Empty:
                continue
            if message is None:
                closed = True
                break
            if message.get("event") in ("result", "failed"):
                final = message
            else:
                on_event(message)
    finally:
        # The pipe is closed (the child is exiting), or it timed out, or this process is
        # interrupted: end the child with all it started (leaked helpers and daemons too).
        # Its own session keeps it out of reach of the terminal's Ctrl-C, so this is the
        # only way it ends. A child whose pipe closed is exiting: its launcher passes its
        # exit status on once it has, which a kill now would replace by SIGKILL.
        if closed:
            process.exited_within(_EXIT_GRACE_S)
        process.end()
        reader.join()
        process.stdin.close()
        process.stdout.close()
    if final is not None and final["event"] == "result":
        return ChildOutcome(result=final, error=None)
    if final is not None:
        return ChildOutcome(result=None, error=final["error"], invalid=bool(final.get("invalid")))
    if timed_out:
        return ChildOutcome(result=None, error=None, timed_out=True)
    return ChildOutcome(result=None, error=_crash_message(process.returncode, log_path))
