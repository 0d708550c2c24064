"""Early stopping of trials from their interim metrics: the interface every rule keeps.

Who calls what, and when: the job driver holds one rule per sub-job (built by
:func:`~baobab.advisor.make_stopping_rule`). For each interim report of one of its
running trials (what the template passed to ``TrialContext.report``) it calls
:meth:`StoppingRule.value_of` on the report's metrics and :meth:`StoppingRule.report`
with that value; on a :attr:`Action.STOP` it asks the trial to stop (the executor's
``request_stop``) with :attr:`Decision.reason`. When a trial ends, whatever the way,
it calls :meth:`StoppingRule.finished`. The rules work with any proposal strategy:
they see trial ids, steps and values, never knobs.

Rules are pure (no clock, no IO, no randomness), so a restarted driver gets the same
rule back by replaying what happened, in the order it happened: the reports (metric
rows in the order they were stored) and the ends of trials, as :class:`Report` and
:class:`Finish` events (``make_stopping_rule(name, history=events)``). Decisions depend
on the values recorded so far, not on the order within them, so two reports that the
store happens to order differently only matter if a decision fell between them.

Higher values are better unless a rule is built with ``mode="min"``.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from baobab.exceptions import StrategyError

__all__ = [
    "DEFAULT_METRICS",
    "Action",
    "Decision",
    "Finish",
    "NoStopping",
    "Report",
    "StoppingEvent",
    "StoppingRule",
    "whole_number",
]

#: The metrics a rule reads when it is given none, the first present in a report wins:
#: a validation score when the template reports one, else ``TorchModel``'s ``train_score``.
DEFAULT_METRICS: tuple[str, ...] = ("val_score", "score", "train_score")


class Action(enum.StrEnum):
    CONTINUE = "CONTINUE"
    STOP = "STOP"


@dataclass(frozen=True)
class Decision:
    """What a rule answers to a report, and why (the reason goes to the trial's log when it stops)."""

    action: Action
    reason: str

    @property
    def stop(self) -> bool:
        return self.action is Action.STOP


@dataclass(frozen=True)
class Report:
    """An interim value of a trial: the rule's metric at ``step`` (None when the report lacks it)."""

    trial_id: int
    step: int
    value: float | None


@dataclass(frozen=True)
class Finish:
    """A trial ended: ``value`` is its final score, None when it failed or was cancelled."""

    trial_id: int
    value: float | None


#: What a rule is rebuilt from; a plain ``(trial_id, step, value)`` tuple counts as a Report.
StoppingEvent = Report | Finish | tuple[int, int, float | None]


class StoppingRule(ABC):
    """Decides from interim values whether a running trial goes on.

    Subclasses implement :meth:`_observe`; the base class reads the metric, keeps the
    trials it stopped (their later reports are answered STOP again and not recorded:
    they are stragglers that had not seen the stop yet) and the finished ones (whose
    late reports are recorded but decide nothing).

    Args:
        metric: the metric to read; None takes the first of :data:`DEFAULT_METRICS` a report holds.
        mode: ``"max"`` (higher is better) or ``"min"``.
    """

    #: The name users give to pick this rule.
    name: ClassVar[str] = ""

    def __init__(self, *, metric: str | None = None, mode: str = "max") -> None:
        if metric is not None and (not isinstance(metric, str) or not metric):
            raise StrategyError(f"{self.name} option metric={metric!r} must be a metric name or None")
        if mode not in ("max", "min"):
            raise StrategyError(f"{self.name} option mode={mode!r} must be 'max' or 'min'")
        self.metric = metric
        self.mode = mode
        self._sign = 1.0 if mode == "max" else -1.0
        self._stopped: dict[int, str] = {}
        self._finished: set[int] = set()

    @property
    def stopped(self) -> Mapping[int, str]:
        """The trials this rule stopped, with the reason."""
        return dict(self._stopped)

    def value_of(self, metrics: Mapping[str, float | None]) -> float | None:
        """This rule's value in a report's metrics; None when it lacks the metric or the value is not finite."""
        names = (self.metric,) if self.metric is not None else DEFAULT_METRICS
        for name in names:
            value = metrics.get(name)
            if value is not None:
                return float(value) if math.isfinite(value) else None
        return None

    def expected_share(self, steps: int) -> float:
        """The share of a trial of ``steps`` steps this rule is expected to let run, for forecasts. 1 here:
        a rule whose stops depend on the values seen says nothing ahead (an upper bound)."""
        return 1.0

    def report(self, trial_id: int, step: int, value: float | None) -> Decision:
        """Record an interim value of a running trial and decide whether it goes on.

        A missing or non-finite value decides nothing (CONTINUE).

        Raises:
            TypeError: ``trial_id`` or ``step`` is not an int.
        """
        for name, number in (("trial_id", trial_id), ("step", step)):
            if isinstance(number, bool) or not isinstance(number, int):
                raise TypeError(f"{name} must be an int, got {number!r}")
        if trial_id in self._stopped:
            return Decision(Action.STOP, self._stopped[trial_id])
        if value is None or not math.isfinite(value):
            return Decision(Action.CONTINUE, f"{self.name}: no finite value at step {step}")
        decision = self._observe(trial_id, step, self._sign * float(value))
        if trial_id in self._finished:
            return Decision(Action.CONTINUE, f"{self.name}: trial {trial_id} has finished")
        if decision.stop:
            self._stopped[trial_id] = decision.reason
        return decision

    def finished(self, trial_id: int, final_value: float | None = None) -> None:
        """A trial ended; ``final_value`` is its score, None when it failed, was cancelled or stopped by others."""
        self._finished.add(trial_id)
        completed = final_value is not None and math.isfinite(final_value) and trial_id not in self._stopped
        self._on_finished(trial_id, completed)

    def replay(self, history: Iterable[StoppingEvent]) -> None:
        """Feed past events in the order they happened (see the module docstring)."""
        for event in history:
            if isinstance(event, Finish):
                self.finished(event.trial_id, event.value)
            elif isinstance(event, Report):
                self.report(event.trial_id, event.step, event.value)
            else:
                trial_id, step, value = event
                self.report(trial_id, step, value)

    @abstractmethod
    def _observe(self, trial_id: int, step: int, value: float) -> Decision:
        """Record ``value`` (already signed so that higher is better) and decide.

        Called for running and for finished trials (whose decision is ignored), never
        for trials this rule stopped. Reasons show values with :meth:`_shown`.
        """

    def _on_finished(self, trial_id: int, completed: bool) -> None:  # noqa: B027 - an optional hook
        """A trial ended; ``completed``: with a score, and not stopped by this rule."""

    def _shown(self, value: float) -> str:
        """A signed value as the template reported it."""
        return f"{self._sign * value:.4g}"


class NoStopping(StoppingRule):
    """Never stops a trial: what ``"none"`` gives, so the driver needs no special case."""

    name = "none"

    def _observe(self, trial_id: int, step: int, value: float) -> Decision:
        return Decision(Action.CONTINUE, "no early stopping")


def whole_number(owner: str, option: str, value: object, minimum: int) -> int:
    """``value`` when it is an int of at least ``minimum``; else a StrategyError naming the option."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StrategyError(f"{owner} option {option}={value!r} must be a whole number >= {minimum}")
    return value
