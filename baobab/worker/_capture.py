"""What a template prints becomes trial log lines.

While a trial runs, ``sys.stdout`` and ``sys.stderr`` are replaced by tees: every write
still reaches the original stream (the worker's log file, a terminal), and each
complete line also goes to the trial's log. A carriage return starts the line over,
as on a terminal, so a progress bar gives one line (its last state), not hundreds.

Only Python-level writes are seen; what C code writes to file descriptors 1 and 2
reaches the worker's log file only. Threads that must never be captured (the one
writing log rows to the database: a failure it reports would feed itself) are
skipped by :func:`ignore_thread`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["capture_prints", "ignore_thread"]

#: Longer lines are cut: a log row is for reading, not for dumping arrays.
MAX_LINE = 10_000

_ignored: set[int] = set()


def ignore_thread(ident: int) -> None:
    """Never capture what the thread ``ident`` writes (it still reaches the original stream)."""
    _ignored.add(ident)


class _LineTee:
    """A text stream that writes through to ``stream`` and hands each complete line to ``on_line``."""

    def __init__(self, stream: TextIO | None, on_line: Callable[[str], None]) -> None:
        self._stream = stream
        self._on_line = on_line
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        if self._stream is not None:
            self._stream.write(text)
            if "\n" in text:
                self._stream.flush()
        if threading.get_ident() in _ignored:
            return len(text)
        with self._lock:
            *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._stream is not None:
            self._stream.flush()

    def end(self) -> None:
        """Emit the last line, if it has no newline yet."""
        with self._lock:
            line, self._partial = self._partial, ""
        self._emit(line)

    def _emit(self, line: str) -> None:
        line = line.rsplit("\r", 1)[-1].rstrip()
        if not line:
            return
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f"... ({len(line) - MAX_LINE} more characters)"
        try:
            self._on_line(line)
        except Exception:
            pass  # losing a log line must not fail the template's print()

    def __getattr__(self, name: str) -> Any:
        # fileno, isatty, encoding, buffer...: what libraries ask of sys.stdout.
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


@contextlib.contextmanager
def capture_prints(on_line: Callable[[str], None]) -> Iterator[None]:
    """Send each line written to ``sys.stdout`` or ``sys.stderr`` in the block to ``on_line`` too.

    The streams are restored when the block ends, even if the template replaced them.
    One trial per process at a time: the streams are the process's.
    """
    stdout, stderr = sys.stdout, sys.stderr
    tees = (_LineTee(stdout, on_line), _LineTee(stderr, on_line))
    sys.stdout, sys.stderr = tees
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        for tee in tees:
            tee.end()
