"""Micro-batching: the queries of concurrent requests go to the members as one batch.

A model answers 32 queries in one call nearly as fast as one query, and every call
costs a round trip through a pipe per member. So requests do not call the members:
they queue their queries, and a dispatcher thread sends batches. When it is idle, a
batch waits up to ``window_s`` after its first query arrived (or until it holds
``max_batch_size`` queries); while it is busy with a batch, the next one fills up on
its own, so under load batches grow without any added wait.

A batcher has one dispatcher per replica of the members' workers
(:mod:`baobab.predictor._scaling` adds and removes them): each takes the next batch
when it is free, so the queue is shared and no replica idles while another has a
backlog. Its :attr:`~MicroBatcher.load`, the requests waiting or being answered, is what
the autoscaler follows: requests, not queries, since a request's queries go out in one
batch (up to ``max_batch_size``), so a second replica can take only another request.

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

__all__ = ["Dispatcher", "MicroBatcher", "Part", "Ticket"]

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


class Dispatcher(Generic[R]):
    """One thread sending batches to ``process``; made by :meth:`MicroBatcher.add`."""

    def __init__(self, process: Callable[[list[Any]], R]) -> None:
        self.process = process
        self.stopping = False  # the batcher's condition guards it
        self.thread: threading.Thread | None = None


class MicroBatcher(Generic[R]):
    """Collects queries from many threads and hands them to its dispatchers' ``process`` in batches.

    Args:
        process: called in the first dispatcher's thread with a batch (a list of queries);
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
        self.window_s = window_s
        self.max_batch_size = max_batch_size
        self._queue: deque[_Item] = deque()
        self._queued = 0  # queries in the queue
        self._condition = threading.Condition()
        self._closed = False
        self._dispatchers: list[Dispatcher[R]] = []
        self._processing = 0  # requests (parts of one) in the batches being answered
        self.add(process)

    def add(self, process: Callable[[list[Any]], R]) -> Dispatcher[R]:
        """Start another dispatcher, sending batches to ``process`` alongside the others.

        Raises:
            RuntimeError: the batcher is closed.
        """
        dispatcher = Dispatcher(process)
        dispatcher.thread = threading.Thread(target=self._run, args=(dispatcher,), name="micro-batcher", daemon=True)
        with self._condition:
            if self._closed:
                raise RuntimeError("the micro-batcher is closed")
            self._dispatchers.append(dispatcher)
        dispatcher.thread.start()
        return dispatcher

    def remove(self, dispatcher: Dispatcher[R]) -> None:
        """Stop ``dispatcher`` once its batch in hand is answered, and wait for that; the others take the queue.

        The first dispatcher, the constructor's, has no handle: it stays, so a queued query always has one.
        """
        with self._condition:
            if dispatcher not in self._dispatchers:
                return
            self._dispatchers.remove(dispatcher)
            dispatcher.stopping = True
            self._condition.notify_all()
        assert dispatcher.thread is not None
        if dispatcher.thread is not threading.current_thread():
            dispatcher.thread.join()

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

    @property
    def load(self) -> int:
        """How many requests (each part of one cut to ``max_batch_size``) wait for a batch or are being answered now."""
        with self._condition:
            return len(self._queue) + self._processing

    def close(self) -> None:
        """Stop taking queries; what is queued is still processed. Waits for the dispatchers."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
            threads = [d.thread for d in self._dispatchers]
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def _take(self, dispatcher: Dispatcher[R]) -> list[_Item] | None:
        """The items of the next batch, once the window has passed or the batch is full; None when closed and
        drained, or when ``dispatcher`` is told to stop."""
        with self._condition:
            while True:
                while not self._queue:
                    if self._closed or dispatcher.stopping:
                        return None
                    self._condition.wait()
                if dispatcher.stopping:
                    return None
                deadline = self._queue[0].arrived + self.window_s
                while self._queue and self._queued < self.max_batch_size and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._condition.wait(left)
                if self._queue:  # else another dispatcher took them while this one waited
                    break
            items: list[_Item] = []
            taken = 0
            while self._queue and (not items or taken + len(self._queue[0].queries) <= self.max_batch_size):
                item = self._queue.popleft()
                items.append(item)
                taken += len(item.queries)
            self._queued -= taken
            self._processing += len(items)
            if self._queue:  # more than one batch waits: an idle dispatcher may take the next
                self._condition.notify()
            return items

    def _run(self, dispatcher: Dispatcher[R]) -> None:
        while (items := self._take(dispatcher)) is not None:
            batch: list[Any] = []
            for item in items:
                batch.extend(item.queries)
            outcome: R | None = None
            error: BaseException | None = None
            try:
                outcome = dispatcher.process(batch)
            except BaseException as e:  # delivered to the requests, which answer 500
                logger.exception("processing a batch of %d queries failed", len(batch))
                error = e
            with self._condition:
                self._processing -= len(items)
            start = 0
            for item in items:
                stop = start + len(item.queries)
                item.ticket._deliver(item.index, Part(outcome, error, start, stop))
                start = stop
