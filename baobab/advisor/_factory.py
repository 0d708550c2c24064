"""Strategies by name: ``make_strategy`` and the ``auto`` rule."""

from __future__ import annotations

import inspect
from typing import Any

from baobab.advisor._base import Strategy
from baobab.advisor._bayes import BayesStrategy
from baobab.advisor._enas import EnasStrategy
from baobab.advisor._evolution import EvolutionStrategy
from baobab.advisor._random import RandomStrategy
from baobab.advisor._space import SearchSpace
from baobab.advisor._tpe import TpeStrategy
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, validate_knob_config

__all__ = ["STRATEGIES", "choose_strategy", "make_strategy", "strategy_class"]

_CLASSES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (RandomStrategy, BayesStrategy, TpeStrategy, EvolutionStrategy, EnasStrategy)
}

#: The names :func:`make_strategy` takes; "auto" picks one of the others.
STRATEGIES: tuple[str, ...] = ("auto", *_CLASSES)

#: Largest space (in dimensions) with a continuous knob that ``auto`` gives to Bayesian
#: optimisation, and the most one-hot features the GP is fitted on.
_MAX_BAYES_DIMENSIONS = 8
_MAX_BAYES_FEATURES = 40


def choose_strategy(knob_config: KnobConfig) -> str:
    """The strategy ``auto`` runs for a knob config, by the kind of its space.

    - Nothing searchable: ``random`` (every strategy proposes ``{}``; random is the cheapest).
    - Every knob discrete (integers, categoricals, ArchKnob positions: grids and
      architectures): ``tpe``. On the regret tables of ``bench/strategies.py`` (HPOBench
      integer grids, HPOLib mixed grids, NAS-Bench-201 cells) ``tpe``'s median regret after
      200 evaluations was at or below ``bayes``'s on every tuning table, and far below it on
      HPOBench, where the GP's expected improvement kept proposing near points it had already
      seen; ``bayes`` had been the choice for small grids before and lost to Optuna's TPE
      there (``bench/results/strategies-regret.md`` holds the figures).
    - A continuous knob, up to eight dimensions and forty one-hot features: ``bayes``. On
      Branin (``bench/results/strategies.md``: two floats and a log-scale integer) the GP
      led Optuna's TPE and ``tpe`` after 25 and 50 evaluations, and trial budgets of real
      trainings are small. No table of continuous knobs has been measured.
    - Larger spaces: ``tpe``. A GP needs many observations per dimension, and its fit
      grows with the number of features, where TPE's cost does not.
    """
    space = SearchSpace(validate_knob_config(knob_config))
    if not len(space):
        return RandomStrategy.name
    if space.is_discrete:
        return TpeStrategy.name
    n_features = sum(len(d.choices) if d.is_categorical else 1 for d in space.dimensions)
    if len(space) <= _MAX_BAYES_DIMENSIONS and n_features <= _MAX_BAYES_FEATURES:
        return BayesStrategy.name
    return TpeStrategy.name


def strategy_class(name: str) -> type[Strategy] | None:
    """The class of the strategy called ``name``; None for ``"auto"`` and unknown names."""
    return _CLASSES.get(name)


def make_strategy(name: str | None, knob_config: KnobConfig, *, seed: int | None = None, **options: Any) -> Strategy:
    """The strategy called ``name`` (None or ``"auto"``: chosen by :func:`choose_strategy`).

    Args:
        name: one of :data:`STRATEGIES`, or None for ``"auto"``.
        knob_config: the template's knob config.
        seed: makes proposals reproducible; None draws fresh entropy.
        **options: the named strategy's own options (see its class); ``auto`` takes none.

    Raises:
        StrategyError: the name is unknown, or an option is not one the strategy takes.
        KnobConfigError: the knob config is invalid.
    """
    if name is None or name == "auto":
        if options:
            raise StrategyError(
                f"strategy 'auto' takes no options, got {', '.join(sorted(options))}; "
                f"name the strategy to tune it ({', '.join(_CLASSES)})"
            )
        name = choose_strategy(knob_config)
    cls = _CLASSES.get(name)
    if cls is None:
        raise StrategyError(f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}")
    accepted = {p.name for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY} - {
        "seed"
    }
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise StrategyError(
            f"strategy {name!r} does not take option(s) {', '.join(unknown)}; "
            f"its options are: {', '.join(sorted(accepted)) or 'none'}"
        )
    return cls(knob_config, seed=seed, **options)
