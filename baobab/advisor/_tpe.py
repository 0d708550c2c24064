"""Tree-structured Parzen estimators, through Optuna's ``TPESampler``.

Bergstra, Bardenet, Bengio and Kégl, "Algorithms for Hyper-Parameter Optimization",
NeurIPS 2011; the multivariate variant is Falkner, Klein and Hutter, "BOHB", ICML 2018.
Optuna is used as a library: each proposal builds a throw-away in-memory study from
the observed records, so the proposal depends on the history and the seed only, and
a rebuilt strategy proposes what the original would have.

On a grid, the candidate of highest l(x)/g(x) is often a point already evaluated
(Optuna repeats a quarter or more of its proposals on tabular benchmarks). Baobab
never evaluates a point twice in a discrete space, and a repeat replaced by a random
point turned that share of the budget into random search; the candidates at taken
points are instead ranked last, so the proposal is the model's best new point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator
from optuna.trial import TrialState, create_trial

from baobab.advisor._base import Strategy, TrialStatus
from baobab.advisor._space import DimensionKind, FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

__all__ = ["TpeStrategy"]

#: Each retry of a proposal that still repeats a taken point draws this many times more candidates.
_RETRY_GROWTH = 4
_RETRIES = 2


class TpeStrategy(Strategy):
    """TPE (Optuna's ``TPESampler``) behind Baobab's propose/observe interface.

    Failed trials are given to Optuna as pruned trials without intermediate values,
    which its TPE ranks below every completed trial: the search steers away from them
    instead of ignoring them. Pending trials are running trials, which the sampler's
    constant liar counts as bad. In a discrete space the candidates at observed or
    pending points are ranked below every other; when all of them are taken, the
    proposal is asked again with four, then sixteen times more candidates, and only
    then drawn at random among the untaken points (a space nearly exhausted, or the
    random start-up proposals).

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
        taken = self.taken(pending) if self.search_space.is_discrete else set()
        trials = [
            self._trial(point, TrialState.COMPLETE, record.score)
            if record.status is TrialStatus.COMPLETED
            else self._trial(point, TrialState.PRUNED)
            for record, point in self.points()
        ]
        trials += [self._trial(self.search_space.flatten(knobs), TrialState.RUNNING) for knobs in pending]
        for attempt in range(_RETRIES + 1):
            sampler = _UntakenTpeSampler(
                taken,
                self._distributions,
                seed=int(rng.integers(2**31)),
                n_startup_trials=self.n_startup_trials,
                n_ei_candidates=self.n_ei_candidates * _RETRY_GROWTH**attempt,
                multivariate=self.multivariate,
                constant_liar=True,
            )
            study = _quiet_study(sampler)
            study.add_trials(trials)
            trial = study.ask(self._distributions)
            point = tuple(trial.params[name] for name in self._distributions)
            if point not in taken:
                return self.search_space.unflatten(point)
        return self.search_space.unflatten(self.sample_new(rng, taken))

    def _trial(self, point: FlatPoint, state: TrialState, value: float | None = None) -> optuna.trial.FrozenTrial:
        params = dict(zip(self._distributions, point, strict=True))
        return create_trial(state=state, value=value, params=params, distributions=self._distributions)


class _UntakenTpeSampler(optuna.samplers.TPESampler):
    """Optuna's TPE with the candidates at taken points ranked last.

    The ranking is Optuna's acquisition function (log l(x) - log g(x) over candidates
    drawn from l), overridden as a private method: Optuna has no public hook between
    drawing candidates and picking one. Only joint proposals of every knob (the
    multivariate TPE) are masked; a one-knob draw cannot tell a taken point.
    """

    def __init__(self, taken: set[FlatPoint], distributions: Mapping[str, BaseDistribution], **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self._taken = taken
        self._knob_distributions = distributions

    def _compute_acquisition_func(
        self, samples: dict[str, np.ndarray], mpe_below: _ParzenEstimator, mpe_above: _ParzenEstimator
    ) -> np.ndarray:
        values = super()._compute_acquisition_func(samples, mpe_below, mpe_above)
        if not self._taken or samples.keys() != self._knob_distributions.keys():
            return values
        columns = [[dist.to_external_repr(v) for v in samples[name]] for name, dist in self._knob_distributions.items()]
        return np.where([point in self._taken for point in zip(*columns, strict=True)], -np.inf, values)


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
