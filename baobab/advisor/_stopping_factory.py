"""Stopping rules by name: ``make_stopping_rule``."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from baobab.advisor._asha import AshaRule
from baobab.advisor._median import MedianRule
from baobab.advisor._stopping import NoStopping, StoppingEvent, StoppingRule
from baobab.exceptions import StrategyError

__all__ = ["STOPPING_RULES", "make_stopping_rule"]

_CLASSES: dict[str, type[StoppingRule]] = {cls.name: cls for cls in (NoStopping, AshaRule, MedianRule)}

#: The names :func:`make_stopping_rule` takes.
STOPPING_RULES: tuple[str, ...] = tuple(_CLASSES)


def make_stopping_rule(name: str | None, *, history: Iterable[StoppingEvent] = (), **options: Any) -> StoppingRule:
    """The stopping rule called ``name`` (None: ``"none"``), in the state ``history`` leads to.

    Args:
        name: one of :data:`STOPPING_RULES`.
        history: the past reports and ends of trials, in the order they happened (see
            :mod:`baobab.advisor._stopping`): a restarted driver gets the rule it had.
        **options: the rule's own options (see its class).

    Raises:
        StrategyError: the name is unknown, an option is not one the rule takes, or its value is out of range.
    """
    cls = _CLASSES.get("none" if name is None else name)
    if cls is None:
        raise StrategyError(f"unknown stopping rule {name!r}; valid rules: {', '.join(STOPPING_RULES)}")
    accepted = {p.name for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise StrategyError(
            f"stopping rule {cls.name!r} does not take option(s) {', '.join(unknown)}; "
            f"its options are: {', '.join(sorted(accepted))}"
        )
    rule = cls(**options)
    rule.replay(history)
    return rule
