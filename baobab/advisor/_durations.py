"""Run times of a job's latest finished trials, kept sorted so that their median costs nothing.

The driver asks for a median run time whenever it weighs starting a trial near a
deadline or reserving time for a final phase, and it runs for as long as its jobs do.
Keeping every run time of every job grew its memory with each trial (100,000 trials a
job are in reach, see ``bench/scale.py``), and a median of all of them would be slow
to follow a job whose trials change length (early stopping's shorter trials, a final
phase). So only the latest :data:`DURATIONS_KEPT` count; a driver taking a job up
again after a restart refills the window from the job's rows in id order, which may
hold a few other trials than the live window did, and moves the median little.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

__all__ = ["DURATIONS_KEPT", "RecentDurations"]

#: Finished trials whose run times a window keeps (the latest).
DURATIONS_KEPT = 1000


class RecentDurations(Sequence[float]):
    """The latest run times (seconds), as a sorted sequence; NaN and negative ones (a clock step) are left out."""

    def __init__(self, seconds: Iterable[float] = (), *, window: int = DURATIONS_KEPT) -> None:
        if window < 1:
            raise ValueError(f"a window of run times holds at least one, got {window}")
        self._recent: deque[float] = deque()
        self._sorted: list[float] = []
        self.window = window
        for value in seconds:
            self.add(value)

    def add(self, seconds: float) -> None:
        if not math.isfinite(seconds) or seconds < 0:
            return
        if len(self._recent) == self.window:
            oldest = self._recent.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._recent.append(seconds)
        bisect.insort(self._sorted, seconds)

    def median(self) -> float:
        """The median of the window; 0 when it is empty."""
        n = len(self._sorted)
        if not n:
            return 0.0
        middle = n // 2
        return self._sorted[middle] if n % 2 else (self._sorted[middle - 1] + self._sorted[middle]) / 2

    def __len__(self) -> int:
        return len(self._sorted)

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...
    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        return self._sorted[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self._sorted)

    def __repr__(self) -> str:
        return f"RecentDurations({self._sorted!r}, window={self.window})"
