"""The searchable knobs as a flat list of numeric and categorical dimensions.

Strategies do not deal with knob classes. :class:`SearchSpace` flattens the
searchable part of a knob config into :class:`Dimension` objects (an
:class:`~baobab.model.ArchKnob` gives one categorical dimension per position) and
translates between three views of a point:

- knob values, as templates receive them (exact Python types: ``int`` for an
  IntegerKnob, ``float`` for a FloatKnob, the choice objects themselves for
  categoricals, a list for an ArchKnob);
- a *flat point*: one value per dimension, ints and floats for numeric dimensions
  and the choice's index for categorical ones (indices sidestep ``1 == True == 1.0``);
- a *unit vector*: numeric dimensions mapped to ``[0, 1]`` (through the log when the
  knob says ``is_exp``) and categorical ones as their index, which is what samplers
  and surrogate models work on; :meth:`SearchSpace.features` one-hot encodes it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baobab.exceptions import StrategyError
from baobab.model import ArchKnob, CategoricalKnob, FloatKnob, IntegerKnob, KnobConfig, Knobs, searchable_knobs

__all__ = ["Dimension", "DimensionKind", "FlatPoint", "SearchSpace"]

#: One value per dimension: an int or float for numeric dimensions, an index for categorical ones.
FlatPoint = tuple[Any, ...]


class DimensionKind(enum.StrEnum):
    INTEGER = "INTEGER"
    FLOAT = "FLOAT"
    CATEGORICAL = "CATEGORICAL"


@dataclass(frozen=True)
class Dimension:
    """One axis of the search space.

    ``name`` is the knob's name, or ``"knob[i]"`` for position ``i`` of an ArchKnob.
    Numeric dimensions use ``low``/``high``/``log``; categorical ones ``choices``.
    """

    name: str
    kind: DimensionKind
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    @property
    def is_categorical(self) -> bool:
        return self.kind is DimensionKind.CATEGORICAL

    def index_of(self, value: Any) -> int:
        """The index of ``value`` among the choices; 1, True and 1.0 are told apart."""
        for i, choice in enumerate(self.choices):
            if type(choice) is type(value) and choice == value:
                return i
        raise StrategyError(f"dimension {self.name!r}: {value!r} is not one of {list(self.choices)!r}")

    def to_unit(self, value: Any) -> Any:
        """Unit coordinate of a flat value (or an array of them)."""
        if self.is_categorical:
            return np.asarray(value, dtype=float)
        if self.high == self.low:
            return np.zeros_like(np.asarray(value, dtype=float))
        if self.log:
            return (np.log(value) - np.log(self.low)) / (np.log(self.high) - np.log(self.low))
        return (np.asarray(value, dtype=float) - self.low) / (self.high - self.low)

    def values(self, u: np.ndarray) -> np.ndarray:
        """The nearest values (indices for a categorical) to unit coordinates, clipped into range."""
        if self.is_categorical:
            return np.clip(np.round(u), 0, len(self.choices) - 1)
        u = np.clip(u, 0.0, 1.0)
        if self.log:
            value = np.exp(np.log(self.low) + u * (np.log(self.high) - np.log(self.low)))
        else:
            value = self.low + u * (self.high - self.low)
        if self.kind is DimensionKind.INTEGER:
            value = np.round(value)
        return np.clip(value, self.low, self.high)

    def from_unit(self, u: float) -> Any:
        """The flat value nearest to unit coordinate ``u``."""
        value = self.values(np.float64(u))
        return float(value) if self.kind is DimensionKind.FLOAT else int(value)


class SearchSpace:
    """The searchable knobs of a knob config, flattened into dimensions.

    Args:
        knob_config: a validated knob config; fixed and policy knobs are left out.
    """

    def __init__(self, knob_config: KnobConfig) -> None:
        self.knob_config = searchable_knobs(knob_config)
        dims: list[Dimension] = []
        for name, knob in self.knob_config.items():
            if isinstance(knob, ArchKnob):
                dims += [
                    Dimension(f"{name}[{i}]", DimensionKind.CATEGORICAL, choices=choices)
                    for i, choices in enumerate(knob.items)
                ]
            elif isinstance(knob, CategoricalKnob):
                dims.append(Dimension(name, DimensionKind.CATEGORICAL, choices=knob.values))
            elif isinstance(knob, IntegerKnob):
                dims.append(Dimension(name, DimensionKind.INTEGER, knob.value_min, knob.value_max, knob.is_exp))
            elif isinstance(knob, FloatKnob):
                low, high = float(knob.value_min), float(knob.value_max)
                dims.append(Dimension(name, DimensionKind.FLOAT, low, high, knob.is_exp))
            else:
                raise StrategyError(f"knob {name!r}: cannot search a {type(knob).__name__}")
        self.dimensions: tuple[Dimension, ...] = tuple(dims)
        self._categorical = np.array([d.is_categorical for d in dims], dtype=bool)
        self._sizes = np.array([len(d.choices) for d in dims], dtype=int)

    def __len__(self) -> int:
        return len(self.dimensions)

    @property
    def is_discrete(self) -> bool:
        """Whether every dimension has finitely many values (no FloatKnob)."""
        return all(d.kind is not DimensionKind.FLOAT for d in self.dimensions)

    @property
    def categorical_fraction(self) -> float:
        """The share of dimensions that are categorical (1.0 for an empty space)."""
        return float(self._categorical.mean()) if len(self) else 1.0

    # --- knob values <-> flat points -------------------------------------------------

    def flatten(self, knobs: Mapping[str, Any]) -> FlatPoint:
        """The flat point of a set of knob values; other (non-searchable) keys are ignored."""
        values: list[Any] = []
        dims = iter(self.dimensions)
        for name, knob in self.knob_config.items():
            if name not in knobs:
                raise StrategyError(f"knob {name!r} has no value; got {sorted(knobs)}")
            positions = knobs[name] if isinstance(knob, ArchKnob) else [knobs[name]]
            for value in positions:
                dim = next(dims)
                values.append(dim.index_of(value) if dim.is_categorical else value)
        return tuple(values)

    def unflatten(self, point: Sequence[Any]) -> Knobs:
        """Knob values with the exact types the knobs take."""
        knobs: Knobs = {}
        values = iter(zip(self.dimensions, point, strict=True))
        for name, knob in self.knob_config.items():
            count = len(knob.items) if isinstance(knob, ArchKnob) else 1
            decoded = []
            for dim, value in (next(values) for _ in range(count)):
                if dim.is_categorical:
                    decoded.append(dim.choices[int(value)])
                elif dim.kind is DimensionKind.INTEGER:
                    decoded.append(int(value))
                else:
                    decoded.append(float(value))
            knobs[name] = decoded if isinstance(knob, ArchKnob) else decoded[0]
        return knobs

    # --- unit vectors ----------------------------------------------------------------

    def to_unit(self, points: Sequence[FlatPoint]) -> np.ndarray:
        """An ``(n, len(self))`` array of unit coordinates."""
        array = np.array(points, dtype=float).reshape(len(points), len(self))
        for j, dim in enumerate(self.dimensions):
            array[:, j] = dim.to_unit(array[:, j])
        return array

    def from_unit(self, u: np.ndarray) -> FlatPoint:
        return tuple(d.from_unit(x) for d, x in zip(self.dimensions, u, strict=True))

    def points(self, units: np.ndarray) -> list[FlatPoint]:
        """The flat points nearest to unit vectors: :meth:`from_unit` of each row, a column at a time."""
        columns = []
        for j, dim in enumerate(self.dimensions):
            values = dim.values(np.asarray(units[:, j], dtype=float))
            columns.append(values.tolist() if dim.kind is DimensionKind.FLOAT else values.astype(int).tolist())
        return list(zip(*columns, strict=True)) if columns else [() for _ in range(len(units))]

    def snap(self, units: np.ndarray) -> np.ndarray:
        """Move unit vectors onto points that exist (integers rounded, indices whole)."""
        out = np.array(units, dtype=float).reshape(len(units), len(self))
        for j, dim in enumerate(self.dimensions):
            out[:, j] = dim.to_unit(dim.values(out[:, j]))
        return out

    def sample_unit(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` points drawn uniformly (log-uniformly where ``is_exp``), as unit vectors."""
        u = rng.random((n, len(self)))
        u[:, self._categorical] = np.floor(u[:, self._categorical] * self._sizes[self._categorical])
        return u

    def perturb_unit(self, centres: np.ndarray, rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
        """``n`` neighbours of each centre: numeric dims jittered by ``scale``, some categoricals redrawn."""
        if not len(self):
            return np.zeros((0, 0))
        base = np.repeat(centres, n, axis=0)
        jitter = base + rng.normal(0.0, scale, base.shape)
        redraw = self.sample_unit(rng, len(base))
        change = rng.random(base.shape) < 1.0 / len(self)
        change[np.arange(len(base)), rng.integers(len(self), size=len(base))] = True
        out = np.where(self._categorical, np.where(change, redraw, base), np.clip(jitter, 0.0, 1.0))
        return out

    def features(self, units: np.ndarray) -> np.ndarray:
        """Unit vectors with categorical coordinates one-hot encoded, for surrogate models."""
        columns = []
        for j, dim in enumerate(self.dimensions):
            if dim.is_categorical:
                columns.append(np.eye(len(dim.choices))[units[:, j].astype(int)])
            else:
                columns.append(units[:, j : j + 1])
        return np.hstack(columns) if columns else np.zeros((len(units), 0))

    def key(self, unit: np.ndarray) -> tuple[float, ...]:
        """A hashable identity of a snapped point, to spot repeats."""
        return tuple(np.round(unit, 9).tolist())
