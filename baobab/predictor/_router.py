"""Routing requests to versions by weight, and swapping the versions without dropping a request.

A version is a name and a weight over a :class:`Backend`: the workers of one set of
members (one or more replicas of a :class:`~baobab.predictor._members.MemberPool`)
behind their own :class:`~baobab.predictor._batching.MicroBatcher`. Versions with the same members share
one backend, so changing only a weight (or a name) keeps the running workers.

Each request is routed once, at random with probability weight / sum of weights, and
counted in flight on its backend until it has its answer. :meth:`VersionRouter.swap`
replaces the routing table in one step under the router's lock: a request routed
before it is answered by the old version, one routed after by the new table, none is
refused. A backend the new table no longer uses is closed once its last request in
flight is answered.
"""

from __future__ import annotations

import bisect
import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from baobab.predictor._batching import Dispatcher, MicroBatcher
from baobab.predictor._job import MemberSpec
from baobab.predictor._members import BatchOutcome, MemberPool

__all__ = ["Backend", "ServedVersion", "VersionRouter"]

logger = logging.getLogger("baobab.predictor")


class Backend:
    """The workers of one member set and the batcher in front of them.

    The workers come in replicas: each a complete :class:`MemberPool` of the members,
    with a dispatcher of its own on the one batcher (:mod:`baobab.predictor._scaling`
    decides how many). The first replica stays as long as the backend.

    Args:
        members: the members, best first (the order answers list them in).
        pool: their first replica's workers, started.
        serve: what a replica's dispatcher calls with a batch, given its pool.
        window_s, max_batch_size: see :class:`MicroBatcher`.
    """

    def __init__(
        self,
        members: Sequence[MemberSpec],
        pool: MemberPool,
        serve: Callable[[MemberPool], Callable[[list[Any]], BatchOutcome]],
        *,
        window_s: float,
        max_batch_size: int,
    ) -> None:
        self.specs = tuple(members)
        self.members = tuple(m.trial_id for m in members)
        self.key = tuple(sorted(self.members))
        self._serve = serve
        self.batcher: MicroBatcher[BatchOutcome] = MicroBatcher(
            serve(pool), window_s=window_s, max_batch_size=max_batch_size
        )
        self._pools = [pool]
        self._dispatchers: list[Dispatcher[BatchOutcome]] = []  # of the replicas after the first
        self._lock = threading.Lock()
        self._closed = False
        self.started = 1  # replicas ever started: names the next one's logs
        self.in_flight = 0  # requests routed here and not answered yet; the router's lock guards it

    @property
    def replicas(self) -> int:
        """How many replicas take batches now."""
        with self._lock:
            return len(self._pools)

    def ready_count(self) -> int:
        """How many members are up now in the replica that has the most up."""
        with self._lock:
            pools = list(self._pools)
        return max(pool.ready_count() for pool in pools)

    def add(self, pool: MemberPool) -> bool:
        """Serve batches with ``pool`` (started and warmed) too; False, and ``pool`` closed, once the backend is."""
        with self._lock:
            if not self._closed:
                self._dispatchers.append(self.batcher.add(self._serve(pool)))
                self._pools.append(pool)
                return True
        pool.close()
        return False

    def remove_newest(self) -> None:
        """Take the newest replica out once its batch in hand is answered, then close its workers."""
        with self._lock:
            if self._closed or len(self._pools) == 1:
                return
            pool, dispatcher = self._pools.pop(), self._dispatchers.pop()
        self.batcher.remove(dispatcher)
        pool.close()

    def close(self) -> None:
        """Stop its batcher (nothing is queued once no request is in flight), then its workers."""
        with self._lock:
            self._closed = True
            pools = list(self._pools)
        self.batcher.close()
        for pool in pools:
            pool.close()


@dataclass(frozen=True)
class ServedVersion:
    """A version as the router serves it."""

    name: str
    weight: float
    backend: Backend


@dataclass(frozen=True)
class _Table:
    revision: int
    versions: tuple[ServedVersion, ...]
    bounds: tuple[float, ...]  # the running sums of the weights

    @classmethod
    def of(cls, revision: int, versions: Sequence[ServedVersion]) -> _Table:
        return cls(revision, tuple(versions), tuple(accumulate(v.weight for v in versions)))

    def pick(self, draw: float) -> ServedVersion:
        """The version ``draw`` (in [0, 1)) falls on; a version of weight 0 is never picked."""
        index = bisect.bisect_right(self.bounds, draw * self.bounds[-1])
        return self.versions[min(index, len(self.versions) - 1)]

    def backends(self) -> list[Backend]:
        return list({id(v.backend): v.backend for v in self.versions}.values())


class VersionRouter:
    """Routes each request to a version and keeps the versions' backends open while they are needed.

    Args:
        rng: draws the route of each request (a seeded one makes routing repeatable).
    """

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._table = _Table(0, (), ())  # revision 0: nothing to serve yet

    @property
    def revision(self) -> int:
        """The revision served now; 0 before the first :meth:`swap`."""
        return self._table.revision

    @property
    def versions(self) -> tuple[ServedVersion, ...]:
        return self._table.versions

    @contextmanager
    def route(self) -> Iterator[ServedVersion]:
        """The version that serves this request, held in flight until the block ends.

        Raises:
            RuntimeError: nothing is served yet (the predictor answers only after its first swap).
        """
        with self._lock:
            if not self._table.versions:
                raise RuntimeError("no version is served yet")
            version = self._table.pick(self._rng.random())
            backend = version.backend
            backend.in_flight += 1
        try:
            yield version
        finally:
            with self._lock:
                backend.in_flight -= 1
                if backend.in_flight == 0:
                    self._drained.notify_all()

    def swap(self, revision: int, versions: Sequence[ServedVersion]) -> None:
        """Serve ``versions`` (weights summing above 0) from now on; backends left unused close once drained."""
        if not versions or sum(v.weight for v in versions) <= 0:
            raise ValueError(f"revision {revision}: the versions' weights must sum to a positive number")
        table = _Table.of(revision, versions)
        with self._lock:
            old, self._table = self._table, table
        kept = {id(backend) for backend in table.backends()}
        for backend in old.backends():
            if id(backend) not in kept:
                threading.Thread(target=self._retire, args=(backend,), name="retire", daemon=True).start()

    def queued(self) -> int:
        """Queries waiting for a batch in the backends served now."""
        return sum(backend.batcher.queued for backend in self._table.backends())

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` shows: the members up now of every version served, and the revision."""
        table = self._table
        backends = table.backends()
        return {
            "members": sum(len(b.members) for b in backends),
            "ready": sum(b.ready_count() for b in backends),
            "revision": table.revision,
            "versions": [
                {
                    "name": v.name,
                    "weight": v.weight,
                    "members": list(v.backend.members),
                    "ready": v.backend.ready_count(),
                    "replicas": v.backend.replicas,
                }
                for v in table.versions
            ],
        }

    def backends(self) -> list[Backend]:
        """The backends served now."""
        return self._table.backends()

    def replicas(self) -> int:
        """Worker replicas of the backends served now, added up."""
        return sum(backend.replicas for backend in self._table.backends())

    def _retire(self, backend: Backend) -> None:
        with self._drained:
            self._drained.wait_for(lambda: backend.in_flight == 0)
        logger.info("closing the workers of trials %s: no version serves them any more", list(backend.members))
        backend.close()


def backends_of(versions: Iterable[ServedVersion]) -> dict[tuple[int, ...], Backend]:
    """The backends of ``versions`` by their member sets."""
    return {v.backend.key: v.backend for v in versions}
