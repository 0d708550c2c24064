"""The event channel: how the parts of the platform wake each other.

Every state change is written to the metadata store first; an event only says "look
again at row N". So an event that is lost (a process restarts between the write and
the publish) delays work but never loses it: the listeners also look at the store
when they start and when their own timers fire.

The admin API publishes JOB_CREATED, JOB_STOPPED, TRIAL_STOP_REQUESTED,
INFERENCE_CREATED and INFERENCE_STOPPED after it commits; the executor publishes TRIAL_FINISHED once a
trial's outcome is stored. The job driver and the inference supervisor subscribe.

:class:`LocalEventChannel` connects threads of one process (``baobab up``); the
cluster mode swaps in a channel on the broker, with the same interface.
"""

from __future__ import annotations

import enum
import queue
import threading
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Event", "EventChannel", "EventKind", "LocalEventChannel", "Subscription"]


class EventKind(enum.StrEnum):
    """What changed; :attr:`Event.id` is the id of the row it names."""

    JOB_CREATED = "JOB_CREATED"  # train_jobs.id
    JOB_STOPPED = "JOB_STOPPED"  # train_jobs.id: a user asked it to stop
    TRIAL_FINISHED = "TRIAL_FINISHED"  # trials.id: its final state is stored
    TRIAL_STOP_REQUESTED = "TRIAL_STOP_REQUESTED"  # trials.id: a user asked this one trial to stop
    TRIAL_METRICS = "TRIAL_METRICS"  # trials.id: it reported interim metrics (early-stopping rules read them)
    INFERENCE_CREATED = "INFERENCE_CREATED"  # inference_jobs.id
    INFERENCE_STOPPED = "INFERENCE_STOPPED"  # inference_jobs.id


@dataclass(frozen=True)
class Event:
    kind: EventKind
    id: int


class Subscription(Protocol):
    """Events of the kinds subscribed to, in the order they were published."""

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when ``timeout`` seconds pass without one (or after :meth:`close`)."""
        ...

    def close(self) -> None:
        """Stop receiving; a :meth:`get` waiting in another thread returns None."""
        ...


class EventChannel(Protocol):
    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every open subscription to its kind; never blocks on a slow listener."""
        ...

    def subscribe(self, *kinds: EventKind) -> Subscription:
        """A subscription to ``kinds`` (every kind when none is given), receiving events published from now on."""
        ...


class _LocalSubscription:
    def __init__(self, channel: LocalEventChannel, kinds: frozenset[EventKind]) -> None:
        self.kinds = kinds
        self._channel = channel
        self._queue: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._closed = False

    def put(self, event: Event | None) -> None:
        self._queue.put(event)

    def get(self, timeout: float | None = None) -> Event | None:
        if self._closed:
            return None
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._closed = True
        self._channel.unsubscribe(self)
        self._queue.put(None)


class LocalEventChannel:
    """Threads of one process: each subscription has its own unbounded queue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: list[_LocalSubscription] = []

    def publish(self, event: Event) -> None:
        with self._lock:
            listeners = [s for s in self._subscriptions if event.kind in s.kinds]
        for subscription in listeners:
            subscription.put(event)

    def subscribe(self, *kinds: EventKind) -> Subscription:
        subscription = _LocalSubscription(self, frozenset(kinds or EventKind))
        with self._lock:
            self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: _LocalSubscription) -> None:
        with self._lock:
            if subscription in self._subscriptions:
                self._subscriptions.remove(subscription)
