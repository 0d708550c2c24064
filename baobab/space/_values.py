"""Value choices: decisions a base model reads while it is built.

A width or a depth changes constructor arguments, which torch.fx cannot rewrite after
tracing; so a value choice is applied when the space builds its base, not as a graph
rewrite. Outside a space (a plain ``Net()``) it returns its first candidate, so a base
model stays an ordinary module. Because the base is ordinary Python, a value can follow
an earlier one (``out = 2 * width``), and a decision read only on one branch (a kernel
size of a block that exists when ``depth >= 3``) exists only when that branch runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from baobab.model import CategoricalKnob
from baobab.space._errors import SpaceError

__all__ = ["building", "candidates_of", "check_label", "value_choice"]

Scalar = str | int | float | bool | None


@dataclass
class _Build:
    """The value choices of one build of a base: those given, those met, those read."""

    choices: Mapping[str, Any]
    met: dict[str, tuple[Scalar, ...]] = field(default_factory=dict)


_current: ContextVar[_Build | None] = ContextVar("baobab_space_build", default=None)


def check_label(label: object, what: str) -> str:
    """A decision's label becomes a knob name, so it must be an identifier."""
    if not isinstance(label, str) or not label.isidentifier():
        raise SpaceError(f"{what}: label {label!r} must be a Python identifier (it becomes a knob name)")
    return label


def candidates_of(candidates: Sequence[Scalar], what: str) -> tuple[Scalar, ...]:
    """Candidates as a tuple, checked by the rules of a categorical knob (scalars, none twice)."""
    values = tuple(candidates) if isinstance(candidates, (list, tuple)) else candidates
    try:
        CategoricalKnob(values).validate()
    except ValueError as e:
        raise SpaceError(f"{what}: {e}") from None
    return values  # type: ignore[return-value]


def value_choice(label: str, candidates: Sequence[Scalar]) -> Any:
    """The value this build of the base takes for decision ``label``; the first candidate by default.

    Example (inside a base model's ``__init__``)::

        width = value_choice("width", [16, 32, 64])
        self.conv = nn.Conv2d(3, width, 3)
        self.head = nn.Linear(width, 10)
    """
    label = check_label(label, "value_choice")
    values = candidates_of(candidates, f"value_choice {label!r}")
    build = _current.get()
    if build is None:
        return values[0]
    known = build.met.setdefault(label, values)
    if known != values:
        raise SpaceError(
            f"value_choice {label!r} is read twice with different candidates: {list(known)} and {list(values)}"
        )
    value = build.choices.get(label, values[0])
    if not any(type(value) is type(v) and value == v for v in values):
        raise SpaceError(f"value_choice {label!r}: {value!r} is not one of {list(values)}")
    return value


@contextlib.contextmanager
def building(choices: Mapping[str, Any]) -> Iterator[_Build]:
    """Value choices read inside the block take their values from ``choices``."""
    build = _Build(choices)
    token = _current.set(build)
    try:
        yield build
    finally:
        _current.reset(token)
