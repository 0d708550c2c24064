"""Regularised evolution: tournaments among the youngest trials, children one mutation away.

Real, Aggarwal, Huang and Le, "Regularized Evolution for Image Classifier
Architecture Search", AAAI 2019. The population is the ``population_size`` most
recent scored trials (by trial id): a trial ages out however good it was, which is
the paper's regularisation; a lucky score cannot hold the search on its
neighbourhood for ever. Each proposal samples ``sample_size`` members with
replacement (as the paper's Algorithm 1 does), takes the best-scored as the parent,
and changes exactly one of its dimensions.

The parent of a proposal is public through :meth:`EvolutionStrategy.lineage`, worked
out from the same generator as the proposal, so a child trial can be given its
parent's weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from baobab.advisor._base import Strategy
from baobab.advisor._space import Dimension, DimensionKind, FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

__all__ = ["EvolutionStrategy"]

#: Standard deviation of a numeric mutation, in unit coordinates (after the log where
#: ``is_exp``): a tenth of the range keeps a child near its parent, as one step should.
_NUMERIC_SCALE = 0.1

#: Mutations of the parent tried before a proposal falls back to a random point: a
#: child may already be observed or pending, and a parent in a small discrete space may
#: have few untaken neighbours.
_MUTATION_TRIES = 8


class EvolutionStrategy(Strategy):
    """Regularised evolution (aging evolution) behind Baobab's propose/observe interface.

    Until the population is full (``population_size`` scored trials) proposals are
    random. Trials without a score (failed ones) are never parents and take no place in
    the population, but their points, like those of pending trials, are not proposed again. A child that
    is taken is mutated again from the same parent, a few times, then replaced by a
    random point.

    A mutation changes one dimension, chosen among those with more than one value: a
    categorical one to another choice, a float one by a Gaussian step of a tenth of its
    (log) range, clipped to its bounds (a step clipped back onto the parent is a taken
    point, so it is drawn again), and an integer one likewise, rounded. An integer step
    follows its knob's scale: ``units`` on a log scale from 1 to 1024 moves from 512 by a
    factor (1.7 in the median), where steps of one would leave it near its start, while
    ``depth`` from 1 to 4 moves to a neighbour. A step that rounds back to the parent's
    value moves one integer the same way: on a short range most steps do, and redrawing
    them would often end the tries in a random proposal.

    Args:
        knob_config: the template's knob config.
        seed: makes proposals reproducible.
        population_size: the most recent scored trials that can be parents.
        sample_size: members drawn per tournament; larger means greedier.
    """

    name = "evolution"

    def __init__(
        self,
        knob_config: KnobConfig,
        *,
        seed: int | None = None,
        population_size: int = 10,
        sample_size: int = 3,
    ) -> None:
        super().__init__(knob_config, seed=seed)
        # NAS-Bench-201's regularised evolution used 10 and 3; the paper's 100 and 25 were for
        # 20,000 trainings, where a train job has tens to hundreds of trials.
        for option, value in [("population_size", population_size), ("sample_size", sample_size)]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StrategyError(f"evolution option {option}={value!r} must be a whole number >= 1")
        if sample_size > population_size:
            raise StrategyError(
                f"evolution option sample_size={sample_size!r} must be at most population_size={population_size!r}; "
                "lower sample_size or raise population_size"
            )
        self.population_size = population_size
        self.sample_size = sample_size

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        point, _, _ = self._child(trial_id, pending)
        return self.search_space.unflatten(point)

    def lineage(self, trial_id: int, pending: Iterable[Knobs] = ()) -> tuple[int | None, str | None]:
        """The parent's trial id and the mutated dimension's name of :meth:`propose`'s answer
        for the same arguments; ``(None, None)`` for a random proposal."""
        _, parent, dimension = self._child(trial_id, pending)
        return parent, dimension

    def parent(self, trial_id: int, pending: Iterable[Knobs] = ()) -> int | None:
        return self.lineage(trial_id, pending)[0]

    def _child(self, trial_id: int, pending: Iterable[Knobs]) -> tuple[FlatPoint, int | None, str | None]:
        """The proposal with its parent and mutated dimension: one computation behind both
        :meth:`propose` and :meth:`lineage`, so that they cannot disagree."""
        rng = self.rng(trial_id)
        taken = self.taken(pending)
        population = self.recent(self.population_size, completed=True)
        mutable = [j for j, dim in enumerate(self.search_space.dimensions) if _has_choice(dim)]
        if len(population) == self.population_size and mutable:
            sample = rng.integers(len(population), size=self.sample_size)
            parent = max((population[i] for i in sample), key=lambda trial_id: cast(float, self.score(trial_id)))
            point = self.point(parent)
            for _ in range(_MUTATION_TRIES):
                j = mutable[int(rng.integers(len(mutable)))]
                dim = self.search_space.dimensions[j]
                child = (*point[:j], _mutate(dim, point[j], rng), *point[j + 1 :])
                if child not in taken:
                    return child, parent, dim.name
        return self.sample_new(rng, taken), None, None


def _has_choice(dim: Dimension) -> bool:
    """Whether a dimension has a value to mutate to."""
    return len(dim.choices) > 1 if dim.is_categorical else dim.high > dim.low


def _mutate(dim: Dimension, value: Any, rng: np.random.Generator) -> Any:
    """Another value of ``dim`` near ``value`` (any other choice, for a categorical)."""
    if dim.is_categorical:
        other = int(rng.integers(len(dim.choices) - 1))
        return other + (other >= value)
    delta = float(rng.normal(0.0, _NUMERIC_SCALE))
    new = dim.from_unit(float(dim.to_unit(value)) + delta)
    if new == value and dim.kind is DimensionKind.INTEGER:
        step = 1 if delta > 0 else -1
        new = value + step if dim.low <= value + step <= dim.high else value - step
    return new
