"""Micro-batching: the queries of concurrent requests go to the members as one batch.

A model answers 32 queries in one call nearly as fast as one query, and every call
costs a round trip through a pipe per member. So requests do not call the members:
they queue their queries, and one dispatcher thread sends batches. When it is idle, a
batch waits up to ``window_s`` after its first query arrived (or until it holds
``max_batch_size`` queries); while it is busy with a batch, the next one fills up on
its own, so under load batches grow without any added wait.

A request's queries are never reordered, but a request larger than
``max_batch_size`` is cut into parts that go out in several batches. Each part comes
back with the outcome of its batch and its slice in it; :meth:`Ticket.wait` returns
them in query order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["MicroBatcher", "Part", "Ticket"]

logger = logging.getLogger("baobab.predictor")

R = TypeVar("R")


@dataclass(frozen=True)
class Part(Generic[R]):
    """Queries ``start:stop`` of the batch whose outcome is ``outcome`` (or whose processing raised ``error``)."""

    outcome: R | None
    error: BaseException | None
    start: int
    stop: int


class Ticket(Generic[R]):
    """A request's claim on the answers to its queries."""

    def __init__(self, parts: int) -> None:
        self._parts: list[Part[R] | None] = [None] * parts
        self._left = parts
        self._done = threading.Event()
        self._lock = threading.Lock()
        if parts == 0:
            self._done.set()

    def _deliver(self, index: int, part: Part[R]) -> None:
        with self._lock:
            self._parts[index] = part
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def wait(self, timeout: float | None = None) -> list[Part[R]] | None:
        """The parts in query order, or None when ``timeout`` seconds pass first."""
        if not self._done.wait(timeout):
            return None
        return [part for part in self._parts if part is not None]


@dataclass
class _Item:
    ticket: Ticket[Any]
    index: int
    queries: Sequence[Any]
    arrived: float


class MicroBatcher(Generic[R]):
    """Collects queries from many threads and hands them to ``process`` in batches.

    Args:
        process: called in the dispatcher thread with a batch (a list of queries);
            what it returns is shared by every part of the batch. It should not raise;
            if it does, the parts carry the exception.
        window_s: how long an idle dispatcher waits for more queries after the first.
        max_batch_size: the most queries in one batch.
    """

    def __init__(self, process: Callable[[list[Any]], R], *, window_s: float, max_batch_size: int) -> None:
        if window_s < 0:
            raise ValueError(f"window_s={window_s!r} must be >= 0")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size={max_batch_size!r} must be >= 1")
        self._process = process
        self.window_s = window_s
        self.max_batch_size = max_batch_size
        self._queue: deque[_Item] = deque()
        self._queued = 0  # queries in the queue
        self._condition = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="micro-batcher", daemon=True)
        self._thread.start()

    def submit(self, queries: Sequence[Any]) -> Ticket[R]:
        """Queue ``queries``; the ticket's :meth:`Ticket.wait` returns their answers.

        Raises:
            RuntimeError: the batcher is closed.
        """
        size = self.max_batch_size
        chunks = [queries[i : i + size] for i in range(0, len(queries), size)]
        ticket: Ticket[R] = Ticket(len(chunks))
        now = time.monotonic()
        with self._condition:
            if self._closed:
                raise RuntimeError("the micro-batcher is closed")
            for index, chunk in enumerate(chunks):
                self._queue.append(_Item(ticket, index, chunk, now))
                self._queued += len(chunk)
            self._condition.notify()
        return ticket

    @property
    def queued(self) -> int:
        """How many queries wait for a batch now."""
        with self._condition:
            return self._queued

    def close(self) -> None:
        """Stop taking queries; what is queued is still processed. Waits for the dispatcher."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _take(self) -> list[_Item] | None:
        """The items of the next batch, once the window has passed or the batch is full; None when closed."""
        with self._condition:
            while not self._queue:
                if self._closed:
                    return None
                self._condition.wait()
            deadline = self._queue[0].arrived + self.window_s
            while self._queued < self.max_batch_size and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._condition.wait(left)
            items: list[_Item] = []
            taken = 0
            while self._queue and (not items or taken + len(self._queue[0].queries) <= self.max_batch_size):
                item = self._queue.popleft()
                items.append(item)
                taken += len(item.queries)
            self._queued -= taken
            return items

    def _run(self) -> None:
        while (items := self._take()) is not None:
            batch: list[Any] = []
            for item in items:
                batch.extend(item.queries)
            outcome: R | None = None
            error: BaseException | None = None
            try:
                outcome = self._process(batch)
            except BaseException as e:  # delivered to the requests, which answer 500
                logger.exception("processing a batch of %d queries failed", len(batch))
                error = e
            start = 0
            for item in items:
                stop = start + len(item.queries)
                item.ticket._deliver(item.index, Part(outcome, error, start, stop))
                start = stop
