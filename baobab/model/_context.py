"""The trial context: how a template talks to the platform from inside ``train()``.

The platform installs a context around each call into the template; the template
reaches it with :func:`get_trial_context` (or ``self.context`` on a BaseModel). Outside
the platform a :class:`TrialContext` that only records is in place, so templates run
unchanged in a notebook.

A sink receives what the template reports. It may answer a report with "stop", which
is how pruners (ASHA, median stopping) and the job driver ask a trial to end early; a
template honours it by checking :attr:`TrialContext.should_stop` between steps.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["ContextSink", "InterimMetric", "TrialContext", "get_trial_context", "trial_context"]


@dataclass(frozen=True)
class InterimMetric:
    step: int
    metrics: dict[str, float]


class ContextSink(Protocol):
    """Where reports go. ``on_report`` returns True to ask the trial to stop."""

    def on_report(self, metric: InterimMetric) -> bool: ...

    def on_log(self, message: str) -> None: ...


@dataclass
class TrialContext:
    """Collects a trial's interim metrics and logs and carries stop requests.

    Thread-safe: the platform may call :meth:`request_stop` from another thread (a
    heartbeat, a time limit) while the template trains.
    """

    sink: ContextSink | None = None
    metrics: list[InterimMetric] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    #: ``(module, example_input) -> result or None``, set by the platform when the trial may
    #: start from the zoo; TorchModel calls it (see baobab.zoo.make_warm_starter).
    warm_starter: Callable[[Any, Any], Any] | None = None
    #: ``(dataset_path, load) -> load()'s (inputs, targets)``, set by a worker that shares decoded,
    #: preprocessed datasets between the trials of its machine (the result may then be arrays
    #: mapped from its cache); TorchModel loads its datasets through it, else calls ``load`` itself.
    data_loader: Callable[[str, Callable[[], tuple[Any, Any]]], tuple[Any, Any]] | None = None
    #: ``zoo_model_id -> module state`` (state-dict names → arrays) of a zoo model the trial's owner may
    #: see, set by the platform's worker for TorchModel trials (None in the dev runner and for
    #: inference); a template that trains on a zoo model reads it through ``TorchModel.zoo_state``.
    zoo_params: Callable[[int], Mapping[str, np.ndarray]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def report(self, step: int, **metrics: float) -> bool:
        """Record interim metrics for ``step`` (an epoch, a batch count, ...).

        Returns:
            True when the platform asks the trial to stop; the same as :attr:`should_stop`.

        Raises:
            TypeError: a step that is not an integer or a metric that is not a number.
        """
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step must be an int, got {step!r}")
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
                raise TypeError(f"metric {name!r} must be a number, got {value!r}")
            values[name] = float(value)
            if not math.isfinite(values[name]):
                values[name] = float("nan")
        metric = InterimMetric(step, values)
        with self._lock:
            self.metrics.append(metric)
        if self.sink is not None and self.sink.on_report(metric):
            self.request_stop("stopped early by the platform")
        return self.should_stop

    def log(self, message: str) -> None:
        text = str(message)
        with self._lock:
            self.logs.append(text)
        if self.sink is not None:
            self.sink.on_log(text)

    def request_stop(self, reason: str) -> None:
        with self._lock:
            if self.stop_reason is None:
                self.stop_reason = reason

    @property
    def should_stop(self) -> bool:
        return self.stop_reason is not None


_current: contextvars.ContextVar[TrialContext | None] = contextvars.ContextVar("baobab_trial_context", default=None)
_fallback = TrialContext()


def get_trial_context() -> TrialContext:
    """The context of the trial running now, or a recording one outside the platform."""
    return _current.get() or _fallback


@contextlib.contextmanager
def trial_context(context: TrialContext) -> Iterator[TrialContext]:
    """Install ``context`` for the calls into a template made inside the block."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
