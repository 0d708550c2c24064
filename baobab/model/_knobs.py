"""Knobs: the typed search space a model template declares.

Knobs are frozen value objects. They serialise to JSON by class name and fields and
compare by value, so a knob config can be stored in the metadata store, sent over HTTP
and read back equal to what the template declared; nothing is pickled.

Constructors only store their fields; :func:`validate_knob_config` checks every rule,
because only the config knows the name under which a bad knob was declared.
"""

from __future__ import annotations

import enum
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from baobab.exceptions import KnobConfigError

__all__ = [
    "EPOCHS_KNOB",
    "ArchKnob",
    "BaseKnob",
    "CategoricalKnob",
    "FixedKnob",
    "FloatKnob",
    "IntegerKnob",
    "KnobConfig",
    "Knobs",
    "Policy",
    "PolicyKnob",
    "knob_config_from_json",
    "knob_config_to_json",
    "knobs_from_json",
    "knobs_to_json",
    "is_structural",
    "searchable_knobs",
    "structural_knobs",
    "structure_key",
    "validate_knob_config",
    "validate_knobs",
]

Scalar = str | int | float | bool | None


class Policy(enum.StrEnum):
    """Cheaper modes a template may support; the job driver sets them per trial."""

    EARLY_STOP = "EARLY_STOP"
    SHARE_PARAMS = "SHARE_PARAMS"
    SKIP_TRAIN = "SKIP_TRAIN"
    QUICK_EVAL = "QUICK_EVAL"
    DOWNSCALE = "DOWNSCALE"


#: The knob a TorchModel reads its epoch count from (``TorchModel.epochs``): a value, not a shape, since
#: a fused stack trains each member's own epochs.
EPOCHS_KNOB = "epochs"


def _is_scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


def _check_scalars(values: Sequence[Any], what: str) -> None:
    if not values:
        raise ValueError(f"{what} is empty; give at least one choice")
    for value in values:
        if not _is_scalar(value):
            raise ValueError(f"{what} holds {value!r}; choices must be str, int, finite float, bool or None")
    seen: list[Any] = []
    for value in values:
        if any(type(value) is type(other) and value == other for other in seen):
            raise ValueError(f"{what} holds {value!r} twice")
        seen.append(value)


def _same(a: object, b: object) -> bool:
    """Equality that tells 1 from True and 1 from 1.0, as JSON does."""
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class BaseKnob(ABC):
    """A knob: one dimension of a template's configuration."""

    _registry: ClassVar[dict[str, type[BaseKnob]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            BaseKnob._registry[cls.__name__] = cls

    #: Whether a search strategy chooses this knob's value (policy and fixed knobs: no).
    searchable: ClassVar[bool] = True

    @abstractmethod
    def validate(self) -> None:
        """Raise ValueError saying which rule the knob's fields break."""

    @abstractmethod
    def check_value(self, value: Any) -> None:
        """Raise ValueError when ``value`` is not one this knob can take."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": type(self).__name__}
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            data[field.name] = value
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> BaseKnob:
        if not isinstance(data, Mapping) or "type" not in data:
            raise ValueError(f"a knob must be an object with a 'type', got {data!r}")
        cls = BaseKnob._registry.get(data["type"])
        if cls is None:
            known = ", ".join(sorted(BaseKnob._registry))
            raise ValueError(f"unknown knob type {data['type']!r}; known types: {known}")
        kwargs = {k: v for k, v in data.items() if k != "type"}
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"{data['type']} fields do not fit: {e}") from None


@dataclass(frozen=True)
class FixedKnob(BaseKnob):
    """A value the template wants passed as is; never searched."""

    value: Scalar
    searchable: ClassVar[bool] = False

    def validate(self) -> None:
        if not _is_scalar(self.value):
            raise ValueError(f"value {self.value!r} must be str, int, finite float, bool or None")

    def check_value(self, value: Any) -> None:
        if not _same(value, self.value):
            raise ValueError(f"is fixed to {self.value!r}, got {value!r}")


@dataclass(frozen=True)
class CategoricalKnob(BaseKnob):
    """One of a list of values."""

    values: tuple[Scalar, ...]

    def __init__(self, values: Sequence[Scalar]) -> None:
        object.__setattr__(self, "values", tuple(values) if isinstance(values, (list, tuple)) else values)

    def validate(self) -> None:
        if not isinstance(self.values, tuple):
            raise ValueError(f"values must be a list, got {self.values!r}")
        _check_scalars(self.values, "values")

    def check_value(self, value: Any) -> None:
        if not any(_same(value, v) for v in self.values):
            raise ValueError(f"{value!r} is not one of {list(self.values)!r}")


@dataclass(frozen=True)
class _RangeKnob(BaseKnob):
    value_min: Any
    value_max: Any
    is_exp: bool = False

    _kind: ClassVar[tuple[type, ...]] = ()

    def validate(self) -> None:
        for name in ("value_min", "value_max"):
            bound = getattr(self, name)
            if isinstance(bound, bool) or not isinstance(bound, self._kind):
                raise ValueError(f"{name}={bound!r} must be {self._kind_name()}")
            if isinstance(bound, float) and not math.isfinite(bound):
                raise ValueError(f"{name}={bound!r} must be finite")
        if not isinstance(self.is_exp, bool):
            raise ValueError(f"is_exp={self.is_exp!r} must be true or false")
        if self.value_min > self.value_max:
            raise ValueError(f"value_min={self.value_min!r} is greater than value_max={self.value_max!r}")
        if self.is_exp and self.value_min <= 0:
            raise ValueError(f"a log scale needs value_min > 0, got value_min={self.value_min!r}")

    def check_value(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, self._kind):
            raise ValueError(f"{value!r} is not {self._kind_name()}")
        if not self.value_min <= value <= self.value_max:
            raise ValueError(f"{value!r} is outside [{self.value_min!r}, {self.value_max!r}]")

    def _kind_name(self) -> str:
        return "an integer" if self._kind == (int,) else "a number"


@dataclass(frozen=True)
class IntegerKnob(_RangeKnob):
    """An integer in ``[value_min, value_max]``, searched on a log scale when ``is_exp``."""

    value_min: int
    value_max: int
    is_exp: bool = False
    _kind: ClassVar[tuple[type, ...]] = (int,)


@dataclass(frozen=True)
class FloatKnob(_RangeKnob):
    """A float in ``[value_min, value_max]``, searched on a log scale when ``is_exp``."""

    value_min: float
    value_max: float
    is_exp: bool = False
    _kind: ClassVar[tuple[type, ...]] = (int, float)

    def check_value(self, value: Any) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value!r} is not finite")
        super().check_value(value)


@dataclass(frozen=True)
class ArchKnob(BaseKnob):
    """An architecture: one choice per position, each position with its own choices.

    Its value is a list with one element per position, in order.
    """

    items: tuple[tuple[Scalar, ...], ...]

    def __init__(self, items: Sequence[Sequence[Scalar]]) -> None:
        if isinstance(items, (list, tuple)):
            items = tuple(tuple(i) if isinstance(i, (list, tuple)) else i for i in items)
        object.__setattr__(self, "items", items)

    def validate(self) -> None:
        if not isinstance(self.items, tuple) or not self.items:
            raise ValueError("items must be a non-empty list of positions")
        for i, choices in enumerate(self.items):
            if not isinstance(choices, tuple):
                raise ValueError(f"position {i} must be a list of choices, got {choices!r}")
            _check_scalars(choices, f"position {i}")

    def check_value(self, value: Any) -> None:
        if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
            raise ValueError(f"{value!r} must be a list of {len(self.items)} choices")
        for i, (v, choices) in enumerate(zip(value, self.items, strict=True)):
            if not any(_same(v, c) for c in choices):
                raise ValueError(f"position {i}: {v!r} is not one of {list(choices)!r}")


@dataclass(frozen=True)
class PolicyKnob(BaseKnob):
    """Declares that the template supports a :class:`Policy`; its value is True or False."""

    policy: str
    searchable: ClassVar[bool] = False

    def __init__(self, policy: str | Policy) -> None:
        object.__setattr__(self, "policy", policy.value if isinstance(policy, Policy) else policy)

    def validate(self) -> None:
        if self.policy not in Policy.__members__:
            raise ValueError(f"unknown policy {self.policy!r}; known policies: {', '.join(Policy.__members__)}")

    def check_value(self, value: Any) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"a policy knob takes true or false, got {value!r}")


KnobConfig = dict[str, BaseKnob]
Knobs = dict[str, Any]


def validate_knob_config(config: object) -> KnobConfig:
    """Check a knob config as returned by ``get_knob_config()`` and return it.

    Raises:
        KnobConfigError: naming the first knob that breaks a rule.
    """
    if not isinstance(config, Mapping):
        raise KnobConfigError(f"a knob config must be a dict of name to knob, got {type(config).__name__}")
    for name, knob in config.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise KnobConfigError("a knob name must be a Python identifier", knob=str(name))
        if not isinstance(knob, BaseKnob):
            raise KnobConfigError(f"must be a knob (FixedKnob, FloatKnob, ...), got {knob!r}", knob=name)
        try:
            knob.validate()
        except ValueError as e:
            raise KnobConfigError(f"{type(knob).__name__}: {e}", knob=name) from None
    return dict(config)


def validate_knobs(config: KnobConfig, knobs: Mapping[str, Any]) -> Knobs:
    """Check that ``knobs`` gives every knob of ``config`` a valid value, and nothing else."""
    for name in knobs:
        if name not in config:
            raise KnobConfigError(f"is not in the knob config; known knobs: {', '.join(config)}", knob=name)
    for name, knob in config.items():
        if name not in knobs:
            raise KnobConfigError("has no value", knob=name)
        try:
            knob.check_value(knobs[name])
        except ValueError as e:
            raise KnobConfigError(str(e), knob=name) from None
    return dict(knobs)


def searchable_knobs(config: KnobConfig) -> KnobConfig:
    """The knobs a search strategy chooses: neither fixed nor policy knobs."""
    return {name: knob for name, knob in config.items() if knob.searchable}


def knob_config_to_json(config: KnobConfig) -> str:
    return json.dumps({name: knob.to_json() for name, knob in config.items()}, allow_nan=False)


def knob_config_from_json(text: str) -> KnobConfig:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise KnobConfigError("a knob config must be a JSON object")
    config = {}
    for name, item in data.items():
        try:
            config[name] = BaseKnob.from_json(item)
        except ValueError as e:
            raise KnobConfigError(str(e), knob=name) from None
    return validate_knob_config(config)


def knobs_to_json(knobs: Mapping[str, Any]) -> str:
    return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in knobs.items()}, allow_nan=False)


def knobs_from_json(text: str) -> Knobs:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise KnobConfigError("knob values must be a JSON object")
    return data


def is_structural(config: KnobConfig, name: str) -> bool:
    """Whether knob ``name`` may shape a trial's model: every knob but a ``FloatKnob`` and TorchModel's
    epoch count (:data:`~baobab.model.EPOCHS_KNOB`), which a stack trains per member.

    Trials of a fused group, and the members a predictor stacks, must build structurally
    identical modules; neither the driver nor the predictor can see which knobs change
    shapes, so they take every knob but a float one as structural (a float knob is a
    value: a learning rate, a weight decay, a dropout rate). Where one shapes the model
    all the same, the process that builds the modules finds the difference (the worker's
    :func:`~baobab.model.fuse_check`, the inference worker's
    :func:`~baobab.model.largest_stack`) and runs the odd ones apart.
    """
    return name != EPOCHS_KNOB and not isinstance(config.get(name), FloatKnob)


def structural_knobs(config: KnobConfig, knobs: Mapping[str, Any]) -> Knobs:
    """The knob values that may shape a trial's model (see :func:`is_structural`)."""
    return {name: value for name, value in knobs.items() if is_structural(config, name)}


def structure_key(config: KnobConfig, knobs: Mapping[str, Any]) -> str:
    """:func:`structural_knobs` as one string: what a sub-job's fusion profiles are kept by, and what
    a predictor groups the members it may stack by."""
    return json.dumps(structural_knobs(config, knobs), sort_keys=True)
