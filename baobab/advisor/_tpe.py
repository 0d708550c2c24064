"""Tree-structured Parzen estimators, through Optuna's ``TPESampler``.

Bergstra, Bardenet, Bengio and Kégl, "Algorithms for Hyper-Parameter Optimization",
NeurIPS 2011; the multivariate variant is Falkner, Klein and Hutter, "BOHB", ICML 2018.
Optuna is used as a library: each proposal builds a throw-away in-memory study from
the observed records, so the proposal depends on the history and the seed only, and
a rebuilt strategy proposes what the original would have.
"""

from __future__ import annotations

from collections.abc import Iterable

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from baobab.advisor._base import Strategy, TrialStatus
from baobab.advisor._space import DimensionKind, FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

__all__ = ["TpeStrategy"]


class TpeStrategy(Strategy):
    """TPE (Optuna's ``TPESampler``) behind Baobab's propose/observe interface.

    Failed trials are given to Optuna as pruned trials without intermediate values,
    which its TPE ranks below every completed trial: the search steers away from them
    instead of ignoring them. Pending trials are running trials, which the sampler's
    constant liar counts as bad. In a discrete space a proposal that repeats an
    observed or pending point is redrawn at random.

    Args:
        knob_config: the template's knob config.
        seed: makes proposals reproducible.
        n_startup_trials: proposals drawn at random before the Parzen estimators are used.
        n_ei_candidates: candidates drawn from the good-points density per proposal.
        multivariate: model the knobs jointly (Optuna's multivariate TPE) or one by one.
    """

    name = "tpe"

    def __init__(
        self,
        knob_config: KnobConfig,
        *,
        seed: int | None = None,
        n_startup_trials: int = 10,
        n_ei_candidates: int = 24,
        multivariate: bool = True,
    ) -> None:
        super().__init__(knob_config, seed=seed)
        for option, value in [("n_startup_trials", n_startup_trials), ("n_ei_candidates", n_ei_candidates)]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StrategyError(f"tpe option {option}={value!r} must be a whole number >= 1")
        self.n_startup_trials = n_startup_trials
        self.n_ei_candidates = n_ei_candidates
        self.multivariate = bool(multivariate)
        self._distributions: dict[str, BaseDistribution] = {
            dim.name: _distribution(dim.kind, dim.low, dim.high, dim.log, len(dim.choices))
            for dim in self.search_space.dimensions
        }

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        pending = list(pending)
        rng = self.rng(trial_id)
        taken = self.taken(pending)
        sampler = optuna.samplers.TPESampler(
            seed=int(rng.integers(2**31)),
            n_startup_trials=self.n_startup_trials,
            n_ei_candidates=self.n_ei_candidates,
            multivariate=self.multivariate,
            constant_liar=True,
        )
        study = _quiet_study(sampler)
        for record, point in self.points():
            if record.status is TrialStatus.COMPLETED:
                study.add_trial(self._trial(point, TrialState.COMPLETE, record.score))
            else:
                study.add_trial(self._trial(point, TrialState.PRUNED))
        for knobs in pending:
            study.add_trial(self._trial(self.search_space.flatten(knobs), TrialState.RUNNING))
        trial = study.ask(self._distributions)
        point = tuple(trial.params[name] for name in self._distributions)
        if self.search_space.is_discrete and point in taken:
            point = self.sample_new(rng, taken)
        return self.search_space.unflatten(point)

    def _trial(self, point: FlatPoint, state: TrialState, value: float | None = None) -> optuna.trial.FrozenTrial:
        params = dict(zip(self._distributions, point, strict=True))
        return create_trial(state=state, value=value, params=params, distributions=self._distributions)


def _distribution(kind: DimensionKind, low: float, high: float, log: bool, n_choices: int) -> BaseDistribution:
    """Optuna's distribution for a dimension; categorical ones range over choice indices."""
    if kind is DimensionKind.CATEGORICAL:
        # Indices, not the choices: Optuna finds a choice with ``==``, which takes True for 1.
        return CategoricalDistribution(list(range(n_choices)))
    if kind is DimensionKind.INTEGER:
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(low, high, log=log)


def _quiet_study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """An in-memory study, created without Optuna's INFO log line."""
    # Optuna logs "A new study created in memory" on every create_study; a proposal is
    # not news to anyone, so its logger is held at WARNING for the call and restored.
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.create_study(direction="maximize", sampler=sampler)
    finally:
        optuna.logging.set_verbosity(verbosity)
