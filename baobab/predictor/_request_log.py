"""Request logs: a sample of what a predictor answered, written to the artifact store off the answer path.

An inference job created with ``request_log_rate`` r > 0 has its predictor keep each
answered request with probability r: the time it came (UTC), how long it took, its
queries, the predictions and which members answered or were left out. Never a header:
the API key stays out of the log.

The request thread only draws the sample and puts a record on a queue bounded in records
and in request bytes; when it is full the record is dropped and counted, so a slow store
never slows answers nor fills the predictor's memory.
One writer thread turns records into JSON lines and writes them as parts (the layout of
:mod:`baobab.store._request_logs`): a part is written when it holds ``max_part_bytes``,
``flush_s`` after its first record, when the UTC day changes, and on :meth:`RequestLog.close`.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from baobab.exceptions import BaobabError
from baobab.store import ArtifactStore, request_log_part_key

__all__ = ["RequestLog"]

logger = logging.getLogger("baobab.predictor")


@dataclass
class _Part:
    """The lines gathered for the next part, all of one UTC day."""

    day: date | None = None
    first: datetime | None = None
    lines: list[bytes] = field(default_factory=list)
    size: int = 0
    due: float | None = None  # time.monotonic() at which it is written however small


class RequestLog:
    """Samples answered requests of one inference job and writes them from a thread of its own.

    Call :meth:`offer` from the request threads and :meth:`close` once, when the predictor stops.

    Args:
        store: where the parts go.
        job_id: the inference job.
        rate: the share of requests kept, in (0, 1].
        flush_s: the longest a record waits in memory before its part is written.
        max_part_bytes: a part is written once it holds this many bytes.
        queue_size: records waiting for the writer; more are dropped (and counted).
        max_queued_bytes: the request bodies those records came in may add up to this
            many bytes (one record alone may be larger); more are dropped (and counted).
        rng: draws the sample; a seeded one makes the sample repeatable.
        clock: the wall clock (``time.time``) that dates the records and so picks their day.
    """

    def __init__(
        self,
        store: ArtifactStore,
        job_id: int,
        rate: float,
        *,
        flush_s: float = 10.0,
        max_part_bytes: int = 1 << 20,
        queue_size: int = 1024,
        max_queued_bytes: int = 64 << 20,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"request_log_rate must be in (0, 1] for a request log, got {rate!r}")
        self._store = store
        self._job_id = job_id
        self._rate = rate
        self._flush_s = flush_s
        self._max_part_bytes = max_part_bytes
        self._queue: queue.Queue[tuple[int, dict[str, Any]] | None] = queue.Queue(queue_size)
        self._max_queued_bytes = max_queued_bytes
        self._queued_bytes = 0
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._writer = uuid.uuid4().hex[:8]  # tells apart the parts of two predictors of one job
        self._tries = 0  # parts begun: numbers their names
        self._parts = 0  # parts written
        self._lock = threading.Lock()
        self._closed = False
        self.written = 0  # records in parts written
        self.dropped = 0  # records the full queue turned away
        self.lost = 0  # records whose part could not be written
        self._thread = threading.Thread(target=self._run, name=f"request-log-{job_id}", daemon=True)
        self._thread.start()

    def offer(self, started: float, queries: list[Any], answer: dict[str, Any], size: int) -> bool:
        """Keep this answered request with the log's probability; True if it was queued.

        Args:
            started: ``time.perf_counter()`` when the request came in.
            queries: the queries as the client sent them.
            answer: the body answered (``predictions``, ``version`` and ``members``).
            size: the request body's length in bytes, what the record holds in memory roughly.
        """
        if self._rng.random() >= self._rate:
            return False
        latency_s = time.perf_counter() - started
        record = {
            "time": datetime.fromtimestamp(self._clock() - latency_s, UTC),
            "latency_ms": round(latency_s * 1000, 3),
            "queries": queries,
            "predictions": answer["predictions"],
            "version": answer["version"],
            "members": answer["members"],
        }
        with self._lock:  # with close(): nothing is queued behind the writer's end
            if self._closed:
                return False
            if self._queued_bytes == 0 or self._queued_bytes + size <= self._max_queued_bytes:
                try:
                    self._queue.put_nowait((size, record))
                    self._queued_bytes += size
                    return True
                except queue.Full:
                    pass
            self.dropped += 1
            first = self.dropped == 1
        if first:
            logger.warning(
                "inference job %d: the request log's queue is full; sampled requests are dropped "
                "(counted, and told when the predictor stops)",
                self._job_id,
            )
        return False

    def close(self, timeout: float = 10.0) -> None:
        """Write what is left and stop the writer; later offers are ignored."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._queue.put(None, timeout=timeout)  # the writer is draining, so room comes
        except queue.Full:
            logger.warning(
                "inference job %d: the request log writer did not keep up; unwritten records lost", self._job_id
            )
            return
        self._thread.join(timeout)
        logger.info(
            "inference job %d: the request log wrote %d records (%d parts)", self._job_id, self.written, self._parts
        )
        if self.dropped or self.lost:
            logger.warning(
                "inference job %d: the request log dropped %d sampled requests (queue full) and lost %d (store failed)",
                self._job_id,
                self.dropped,
                self.lost,
            )

    # -- the writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        part = _Part()
        while True:
            wait = None if part.due is None else max(0.0, part.due - time.monotonic())
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:  # the part is due
                self._write(part)
                part = _Part()
                continue
            if item is None:
                self._write(part)
                return
            size, record = item
            self._taken(size)
            at: datetime = record["time"]
            if part.day is not None and at.date() != part.day:
                self._write(part)
                part = _Part()
            try:
                line = json.dumps({**record, "time": at.isoformat()}, allow_nan=False).encode() + b"\n"
            except (TypeError, ValueError):  # what the answer path already sent as JSON: not expected
                logger.exception("inference job %d: a request log record is not JSON", self._job_id)
                self.lost += 1
                continue
            if part.day is None:
                part.day, part.first, part.due = at.date(), at, time.monotonic() + self._flush_s
            part.lines.append(line)
            part.size += len(line)
            if part.size >= self._max_part_bytes:
                self._write(part)
                part = _Part()

    def _taken(self, size: int) -> None:
        with self._lock:
            self._queued_bytes -= size

    def _write(self, part: _Part) -> None:
        if part.day is None or part.first is None:
            return
        self._tries += 1
        name = f"{part.first:%H%M%S%f}-{self._writer}-{self._tries:06d}"
        key = request_log_part_key(self._job_id, part.day, name)
        try:
            self._store.put_bytes(key, b"".join(part.lines))
        except (OSError, BaobabError):
            logger.exception("inference job %d: writing the request log part %s failed", self._job_id, key)
            self.lost += len(part.lines)
            return
        self._parts += 1
        self.written += len(part.lines)
