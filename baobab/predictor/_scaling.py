"""Autoscaling inside a predictor: 1..N replicas of each backend's workers, following its queue.

A replica is a complete set of a backend's member workers with a dispatcher of its
own on the backend's one micro-batcher (:class:`~baobab.predictor._router.Backend`).
Every backend starts with ``min_replicas``. The :class:`Autoscaler` samples, every
``interval_s``, each backend's load: the requests waiting for a batch or being answered
(:attr:`~baobab.predictor._batching.MicroBatcher.load`). Counting the requests being
answered too matters: with micro-batching, clients that wait for their answers are all
in the batch being answered, and nothing waits in the queue however long they wait.
Requests, not queries: a request's queries go out in one batch, so one client sending
large requests keeps one replica busy and would gain nothing from a second.
:class:`ScalingPolicy` aims at ``target`` requests per replica, as Knative's autoscaler
aims at a number of concurrent requests per pod:

- **one more replica** when the mean load over the last ``up_after_s`` is more than
  ``target`` times the replicas, and fewer than ``max_replicas`` run. The new replica
  is loaded and warmed before its dispatcher takes a batch, and no other is added while
  it loads (nor for ``down_after_s`` after a replica failed to load: no retry storm);
- **one fewer** (the newest) when the mean load over the last ``down_after_s`` would
  fit one replica fewer (at most ``target`` times one fewer), and more than
  ``min_replicas`` run. Its dispatcher answers its batch in hand first, then its
  workers are closed, so no request is dropped.

After each change the backend's samples start afresh: the next decision is taken on
what the new number of replicas does, one step at a time. Scaling down waits far
longer than scaling up (30 s against 2 s by default), as Kubernetes' autoscaler does,
so a burst that comes back does not pay for loading its workers twice.

More replicas help where the machine has room for them: a model that keeps a core busy
on one thread (each worker runs one), on a machine with cores to spare. On a GPU, one
replica's batches already fill the device, and the target should be high.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from baobab.exceptions import BaobabError
from baobab.predictor._rollout import BackendStarter
from baobab.predictor._router import Backend, VersionRouter

__all__ = ["Autoscaler", "Sample", "ScalingPolicy"]

logger = logging.getLogger("baobab.predictor")


@dataclass(frozen=True)
class Sample:
    """A backend's load (requests waiting for a batch or being answered) at ``at`` (monotonic seconds)."""

    at: float
    load: int


@dataclass(frozen=True)
class ScalingPolicy:
    """When a backend gets one replica more or one fewer (see the module docstring)."""

    min_replicas: int = 1
    max_replicas: int = 1
    target: float = 4.0
    up_after_s: float = 2.0
    down_after_s: float = 30.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"expected 1 <= min_replicas ({self.min_replicas}) <= max_replicas ({self.max_replicas})")
        for name in ("target", "up_after_s", "down_after_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be positive")

    @property
    def scales(self) -> bool:
        return self.max_replicas > self.min_replicas

    def decide(self, replicas: int, samples: Sequence[Sample]) -> int:
        """+1, -1 or 0: the change for a backend of ``replicas`` replicas, given its samples since its last change
        (oldest first)."""
        if not samples:
            return 0
        now, span = samples[-1].at, samples[-1].at - samples[0].at
        if replicas < self.max_replicas and span >= self.up_after_s:
            if _mean_load(samples, now - self.up_after_s) > replicas * self.target:
                return 1
        if replicas > self.min_replicas and span >= self.down_after_s:
            if _mean_load(samples, now - self.down_after_s) <= (replicas - 1) * self.target:
                return -1
        return 0


def _mean_load(samples: Sequence[Sample], since: float) -> float:
    window = [s.load for s in samples if s.at >= since]
    return sum(window) / len(window)


@dataclass
class _Watched:
    samples: deque[Sample] = field(default_factory=deque)
    loading: bool = False


class Autoscaler:
    """Follows the queues of ``router``'s backends and adds or removes their replicas by ``policy``.

    Args:
        router: whose backends (those served now) are scaled.
        starter: loads the replicas added.
        policy: decides.
        interval_s: seconds between two samples.
    """

    def __init__(
        self, router: VersionRouter, starter: BackendStarter, policy: ScalingPolicy, *, interval_s: float = 0.25
    ) -> None:
        self._router = router
        self._starter = starter
        self._policy = policy
        self._interval_s = interval_s
        # Weak: a backend no version serves any more is closed and dropped by the router.
        self._watched: weakref.WeakKeyDictionary[Backend, _Watched] = weakref.WeakKeyDictionary()

    def run(self, stop: threading.Event) -> None:
        """Sample and decide until ``stop`` is set."""
        while not stop.wait(self._interval_s):
            self.tick()

    def tick(self) -> None:
        """Sample every backend served now once, and act on the policy's decisions."""
        now = time.monotonic()
        for backend in self._router.backends():
            watched = self._watched.setdefault(backend, _Watched())
            if watched.loading:
                continue
            watched.samples.append(Sample(now, backend.batcher.load))
            horizon = now - max(self._policy.up_after_s, self._policy.down_after_s)
            while len(watched.samples) > 1 and watched.samples[1].at <= horizon:  # keep one that spans the windows
                watched.samples.popleft()
            change = self._policy.decide(backend.replicas, watched.samples)
            if change:
                watched.samples.clear()
            if change > 0:
                watched.loading = True
                threading.Thread(target=self._add, args=(backend, watched), name="scale-up", daemon=True).start()
            elif change < 0:
                threading.Thread(target=self._remove, args=(backend,), name="scale-down", daemon=True).start()

    def _add(self, backend: Backend, watched: _Watched) -> None:
        try:
            members, number = list(backend.members), backend.replicas + 1
            logger.info("trials %s: more requests than the replicas' target; starting replica %d", members, number)
            if self._starter.add_replica(backend):
                logger.info("trials %s: %d replicas serve", list(backend.members), backend.replicas)
        except BaobabError as e:  # no member of the new replica loaded: the others serve on
            pause = self._policy.down_after_s
            logger.warning(
                "trials %s: a new replica could not be loaded (%s); not trying again for %g s",
                list(backend.members),
                e,
                pause,
            )
            time.sleep(pause)  # still "loading": no decision for this backend meanwhile, no retry storm
        finally:
            watched.samples.clear()
            watched.loading = False

    def _remove(self, backend: Backend) -> None:
        logger.info("trials %s: fewer replicas would do; stopping replica %d", list(backend.members), backend.replicas)
        backend.remove_newest()
