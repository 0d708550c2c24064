"""The event channel of cluster mode: a fanout exchange on the Celery broker (Redis or RabbitMQ).

The API, the advisors and the predictor hosts run in separate processes, often on
separate machines; they wake each other through the broker they already share with
the workers. Each subscription is a queue of its own bound to one fanout exchange (kombu
maps it to Redis PUBLISH/SUBSCRIBE, or to a RabbitMQ fanout exchange), consumed by a
thread that reconnects, with a growing delay, when the broker goes away.

Events are hints (see :mod:`baobab.store._events`): what is published while the broker
is down, or while a subscriber reconnects, is lost, and the listeners' rescans of the
store find the change anyway. So publishing never waits long and never raises.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from typing import Any

from kombu import Connection, Exchange, Queue

from baobab.store._events import Event, EventKind, Subscription

__all__ = ["BrokerEventChannel"]

logger = logging.getLogger("baobab.store")

_EXCHANGE = "baobab.events"
#: Seconds to connect, and to wait on a socket, before the broker counts as down.
_TIMEOUT_S = 2.0
_MAX_BACKOFF_S = 5.0


def _connection(url: str) -> Connection:
    return Connection(
        url,
        connect_timeout=_TIMEOUT_S,
        transport_options={"socket_timeout": _TIMEOUT_S, "socket_connect_timeout": _TIMEOUT_S},
    )


class _BrokerSubscription:
    def __init__(self, url: str, exchange: Exchange, kinds: frozenset[EventKind]) -> None:
        self._url = url
        self._exchange = exchange
        self._kinds = kinds
        self._queue: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._closed = threading.Event()
        self._bound = threading.Event()
        self._thread = threading.Thread(target=self._run, name="baobab-events", daemon=True)
        self._thread.start()
        # Events published once subscribe() returns must arrive: wait for the queue to be bound
        # (not forever: with the broker down, the rescans do the work until it is back).
        self._bound.wait(timeout=2 * _TIMEOUT_S)

    def get(self, timeout: float | None = None) -> Event | None:
        if self._closed.is_set():
            return None
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._closed.set()
        self._queue.put(None)
        self._thread.join(timeout=2 * _TIMEOUT_S)

    def _on_message(self, body: Any, message: Any) -> None:
        try:
            data = json.loads(body) if isinstance(body, str | bytes) else body
            event = Event(EventKind(data["kind"]), int(data["id"]))
        except (ValueError, KeyError, TypeError):
            logger.warning("ignored a malformed event: %r", body)
        else:
            if event.kind in self._kinds:
                self._queue.put(event)
        message.ack()

    def _run(self) -> None:
        delay = 0.1
        while not self._closed.is_set():
            try:
                with _connection(self._url) as connection:
                    bound = Queue(exchange=self._exchange, exclusive=True, auto_delete=True, durable=False)
                    with connection.Consumer(bound, callbacks=[self._on_message], accept=["json"]):
                        self._bound.set()
                        delay = 0.1
                        while not self._closed.is_set():
                            try:
                                connection.drain_events(timeout=0.5)
                            except TimeoutError:
                                continue
            except Exception as e:  # the broker went away (or never came): try again
                if self._closed.is_set():
                    return
                logger.warning("event channel: broker unreachable (%s); reconnecting in %.1f s", e, delay)
                self._closed.wait(delay)
                delay = min(_MAX_BACKOFF_S, delay * 2)


class BrokerEventChannel:
    """An :class:`~baobab.store.EventChannel` over the broker at ``url`` (``redis://`` or ``amqp://``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._exchange = Exchange(_EXCHANGE, type="fanout", durable=False, delivery_mode="transient")
        self._lock = threading.Lock()
        self._connection: Connection | None = None

    def publish(self, event: Event) -> None:
        body = json.dumps({"kind": event.kind.value, "id": event.id})
        with self._lock:
            try:
                if self._connection is None:
                    self._connection = _connection(self.url)
                producer = self._connection.Producer(serializer="json")
                publish = self._connection.ensure(
                    producer, producer.publish, max_retries=1, interval_start=0.1, interval_max=0.5
                )
                publish(body, exchange=self._exchange, routing_key="", declare=[self._exchange])
            except Exception as e:
                logger.warning("event %s %s not published (the store still has it): %s", event.kind, event.id, e)
                self._reset()

    def subscribe(self, *kinds: EventKind) -> Subscription:
        return _BrokerSubscription(self.url, self._exchange, frozenset(kinds or EventKind))

    def close(self) -> None:
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        if self._connection is not None:
            try:
                self._connection.release()
            except Exception:
                logger.debug("event channel: closing a broken connection failed", exc_info=True)
            self._connection = None
