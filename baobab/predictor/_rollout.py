"""Converging on the wanted versions: poll the store, load what is new, warm it, swap, record.

The predictor polls its job's wanted revision (one integer column) every
``poll_s`` seconds rather than waiting for an event: the event channel of embedded mode
connects the threads of ``baobab up`` only, and the predictor is a process of its own;
in every mode the predictor can read the store (it loads its job from it), a missed
event would need the poll anyway, and one indexed read a second is cheap.

When the wanted revision differs from the one served, each of its versions whose
member set is not served yet gets a backend: its workers are started (the pool loads
every member), then warmed with the last query a request sent, so the first request
routed to it does not pay for a cold model. Only then does the router swap to the new
versions, in one step. Versions whose members are served already keep their workers.
When a new version cannot load at all (no member of it loads), the revision is
recorded as failed with the reason, the running versions keep serving, and it is not
tried again: a new revision (or the same versions set again) is.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baobab.exceptions import BaobabError, StoreError
from baobab.model import Task
from baobab.predictor._job import MemberSpec, PredictorJob, Revision, RevisionStore
from baobab.predictor._members import BatchOutcome, MemberPool
from baobab.predictor._router import Backend, ServedVersion, VersionRouter, backends_of
from baobab.predictor._telemetry import measured_batches

__all__ = ["BackendStarter", "Rollout"]

logger = logging.getLogger("baobab.predictor")


class BackendStarter:
    """Starts the backends of member sets, and their replicas: pools loaded and warmed, behind a batcher.

    Every pool it starts is closed by :meth:`close` (the predictor's shutdown), also one
    still loading.

    Args:
        task: decides how answers are checked and ensembled.
        log_dir: the members' worker logs go there (``trial-<id>.log``; a backend's second
            replica's under ``replica-2/``, and so on).
        member_timeout_s, load_timeout_s: see :class:`MemberPool`.
        window_s, max_batch_size: see :class:`~baobab.predictor._batching.MicroBatcher`.
        fuse: see :class:`MemberPool`.
        replicas: how many replicas each backend starts with.
    """

    def __init__(
        self,
        task: Task,
        *,
        log_dir: Path,
        member_timeout_s: float,
        load_timeout_s: float,
        window_s: float,
        max_batch_size: int,
        fuse: bool = True,
        replicas: int = 1,
    ) -> None:
        self._task = task
        self._log_dir = log_dir
        self._member_timeout_s = member_timeout_s
        self._load_timeout_s = load_timeout_s
        self._window_s = window_s
        self._max_batch_size = max_batch_size
        self._fuse = fuse
        self._replicas = replicas
        # Weak: the pool of a backend no version serves any more is closed and dropped by the router.
        self._pools: weakref.WeakSet[MemberPool] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._sample: list[Any] = []  # the first query of the last batch any backend answered

    def start(self, members: Sequence[MemberSpec]) -> Backend:
        """A backend for ``members`` (best first), ready for traffic.

        Raises:
            NoMemberLoadedError: not one member loaded (the pool is closed again).
        """
        backend = Backend(
            members,
            self._pool(members, self._log_dir),
            self._serve,
            window_s=self._window_s,
            max_batch_size=self._max_batch_size,
        )
        try:
            for _ in range(self._replicas - 1):
                self.add_replica(backend)
        except BaseException:
            backend.close()
            raise
        return backend

    def add_replica(self, backend: Backend) -> bool:
        """Load and warm one more replica of ``backend``'s workers, then let it take batches; False if ``backend``
        closed meanwhile.

        Raises:
            NoMemberLoadedError: not one member loaded (the pool is closed again).
        """
        with self._lock:
            backend.started += 1
            number = backend.started
        return backend.add(self._pool(backend.specs, self._log_dir / f"replica-{number}"))

    def _pool(self, members: Sequence[MemberSpec], log_dir: Path) -> MemberPool:
        """The workers of ``members``, loaded and warmed."""
        pool = MemberPool(
            members,
            self._task,
            log_dir=log_dir,
            member_timeout_s=self._member_timeout_s,
            load_timeout_s=self._load_timeout_s,
            fuse=self._fuse,
        )
        with self._lock:
            self._pools.add(pool)
        try:
            pool.start()
        except BaseException:
            pool.close()
            raise
        sample = self._sample
        if sample:  # the first call into a model can be slow (lazy imports, allocation): not for a client
            outcome = pool.predict(sample)
            if outcome.predictions is None:
                logger.warning("warming trials %s failed: %s", [m.trial_id for m in members], outcome.left_out)
        return pool

    def _serve(self, pool: MemberPool) -> Callable[[list[Any]], BatchOutcome]:
        """What a dispatcher of ``pool`` calls with each batch."""

        def process(batch: list[Any]) -> BatchOutcome:
            self._sample = batch[:1]
            return pool.predict(batch)

        return measured_batches(process)

    def close(self) -> None:
        """Kill the workers of every backend started (safe to call twice)."""
        with self._lock:
            pools = list(self._pools)
        for pool in pools:
            pool.close()


class Rollout:
    """Keeps ``router`` serving what the job wants (see the module docstring).

    Args:
        job: the job, with the revision it wanted at start.
        router: where the versions are served.
        store: the job's revisions in the store.
        backends: starts the backends of new member sets.
        poll_s: seconds between two reads of the wanted revision.
    """

    def __init__(
        self,
        job: PredictorJob,
        router: VersionRouter,
        store: RevisionStore,
        backends: BackendStarter,
        *,
        poll_s: float,
    ) -> None:
        self._job = job
        self._router = router
        self._store = store
        self._backends = backends
        self._poll_s = poll_s
        self._failed: int | None = None  # a revision that could not load: not tried again
        self._recorded = 0  # the served revision last written to the store
        self._unrecorded: tuple[int, str] | None = None  # a failure not written yet
        self._store_down = False

    def start(self) -> None:
        """Serve the revision the job wanted at start; if it cannot load, the one served before.

        Raises:
            NoMemberLoadedError: neither loads (a version without a loadable member).
            JobNotServableError, StoreError: the revision served before cannot be read.
        """
        wanted = self._job.revision
        try:
            self._converge(wanted)
        except BaobabError as e:
            served = self._job.served_revision
            if served is None or served == wanted.number:
                raise
            logger.warning("revision %d cannot be served (%s); serving revision %d again", wanted.number, e, served)
            self._fail(wanted.number, str(e))
            self._converge(self._store.read(served))
        self._report()

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set."""
        while not stop.wait(self._poll_s):
            self.poll()

    def poll(self) -> None:
        """Compare the wanted revision with the one served once, and converge when they differ."""
        try:
            wanted = self._store.wanted()
            if wanted is not None and wanted not in (self._router.revision, self._failed):
                self._apply(wanted)
            self._report()
        except StoreError as e:
            if not self._store_down:
                logger.warning("reading the wanted versions failed, trying again every %g s: %s", self._poll_s, e)
            self._store_down = True
            return
        if self._store_down:
            logger.info("the metadata store answers again")
            self._store_down = False

    def _apply(self, number: int) -> None:
        """Serve revision ``number``, or record why it cannot be (a failing store is tried again at the next poll)."""
        try:
            self._converge(self._store.read(number))
        except StoreError:
            raise
        except BaobabError as e:
            logger.warning("revision %d cannot be served (%s); the running versions keep serving", number, e)
            self._fail(number, str(e))
        except Exception as e:  # a bug of ours: not retried every poll
            logger.exception("revision %d: loading its versions failed", number)
            self._fail(number, f"internal error: {type(e).__name__}; the predictor's log has the details")

    def _converge(self, revision: Revision) -> None:
        running = backends_of(self._router.versions)
        started: dict[tuple[int, ...], Backend] = {}
        served: list[ServedVersion] = []
        try:
            for version in revision.versions:
                backend = running.get(version.key) or started.get(version.key)
                if backend is None:
                    logger.info(
                        "revision %d: loading version %r (trials %s)", revision.number, version.name, version.key
                    )
                    backend = started[version.key] = self._backends.start(version.members)
                served.append(ServedVersion(version.name, version.weight, backend))
        except BaseException:
            for backend in started.values():
                backend.close()
            raise
        self._router.swap(revision.number, served)
        shown = ", ".join(f"{v.name} ({v.weight:g})" for v in served)
        logger.info("serving revision %d: %s", revision.number, shown)

    def _fail(self, number: int, error: str) -> None:
        self._failed = number
        self._unrecorded = (number, error)

    def _report(self) -> None:
        """Write what changed to the store: a failed revision's reason, the revision served."""
        if self._unrecorded is not None:
            self._store.record_failed(*self._unrecorded)
            self._unrecorded = None
        served = self._router.revision
        if served != self._recorded:
            self._store.record_served(served)
            self._recorded = served
