"""Tree-structured Parzen estimators, on Optuna's Parzen estimators.

Bergstra, Bardenet, Bengio and Kégl, "Algorithms for Hyper-Parameter Optimization",
NeurIPS 2011; the multivariate variant is Falkner, Klein and Hutter, "BOHB", ICML 2018.
Each proposal does what Optuna's ``TPESampler._sample`` does with its defaults (the
constant liar on, a single objective), with Optuna's own ``_ParzenEstimator``: split the
records into a good group (the ``gamma(n) = min(ceil(n / 10), 25)`` best) and the rest,
fit one mixture of Parzen estimators l(x) to the good group and one g(x) to the rest
and the pending trials, draw ``n_ei_candidates`` candidates from l and take the one of
highest log l(x) - log g(x). The proposal depends on the history, the pending trials
and the seed only, so a rebuilt strategy proposes what the original would have.
(It used to build a throw-away Optuna study from the whole history per proposal:
180 ms at 1,000 records and 2 s at 10,000.)

**What the model sees.** Up to ``BEST + max_recent`` records (275 by default), all of
them. Past that, the ``BEST`` (25) best-scored records and the ``max_recent`` (250)
most recent ones by trial id, so a proposal costs the same at trial 100,000 as at
trial 300 (a few milliseconds; ``bench/results/scale_proposals.md``). Why this rule:
the good group is never more than 25 records (and with 250 records or more it is 25),
so l(x) is exactly the model of the whole history, given 25 completed records; only
g(x), the density of the not-so-good points, is fitted on a window. Optuna itself
weighs the records of g(x) by age (a ramp from 1/n for the oldest to 1 for the 25
newest), so the recent ones were already those that counted most; the window drops
the faded tail. Why 250: a Parzen estimator costs a kernel per record per candidate,
and 250 keeps a proposal near 5 ms on a busy 2-core machine with four numeric knobs
(1,000 took 16 ms). Below 275 records nothing is left out, so the 200-evaluation
benchmarks of ``bench/strategies.py`` fit the same model as with the whole history.

On a grid, the candidate of highest l(x)/g(x) is often a point already evaluated
(Optuna repeats a quarter or more of its proposals on tabular benchmarks). Baobab
never evaluates a point twice in a discrete space, and a repeat replaced by a random
point turned that share of the budget into random search; the candidates at taken
points are instead ranked last, so the proposal is the model's best new point.

``_ParzenEstimator`` is private to Optuna (pinned in ``pyproject.toml``): Optuna has no
public way to fit TPE's densities to records without a study, and a study built per
proposal costs a deep copy and a validation of every record it holds. Its density is
evaluated here with SciPy's ``log_ndtr`` (see :class:`_ParzenEstimatorScipy`): Optuna 5
computes the normal CDF in pure Python, one call per candidate and record for an
integer knob, 40 ms a proposal with two integer knobs and 125 records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator, _ParzenEstimatorParameters
from optuna.samplers._tpe.probability_distributions import _BatchedCategoricalDistributions
from optuna.samplers._tpe.sampler import default_gamma, default_weights
from scipy.special import log_ndtr, logsumexp, ndtr

from baobab.advisor._base import Strategy, TakenPoints, TrialStatus
from baobab.advisor._space import DimensionKind, FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

__all__ = ["TpeStrategy"]

#: Each retry of a proposal that still repeats a taken point draws this many times more candidates.
_RETRY_GROWTH = 4
_RETRIES = 2

#: The best-scored records the model always sees: Optuna's good group is never larger (``default_gamma``).
BEST = 25

#: Optuna's TPESampler defaults (prior weight 1, magic clip on, endpoints off, its age weights).
_PARAMETERS = _ParzenEstimatorParameters(
    prior_weight=1.0, consider_magic_clip=True, consider_endpoints=False, weights=default_weights, multivariate=True
)


class TpeStrategy(Strategy):
    """TPE (as Optuna's ``TPESampler``) behind Baobab's propose/observe interface.

    Failed and invalid trials count as Optuna's pruned trials without intermediate
    values: ranked below every completed trial, so the search steers away from them
    instead of ignoring them. Pending trials are running trials, which the constant
    liar puts in g(x), the density of the bad points. In a discrete space the
    candidates at observed or pending points are ranked below every other; when all of
    them are taken, the proposal draws four, then sixteen times more candidates, and
    only then a random point among the untaken ones (a space nearly exhausted, or the
    random start-up proposals).

    Args:
        knob_config: the template's knob config.
        seed: makes proposals reproducible.
        n_startup_trials: proposals drawn at random before the Parzen estimators are used.
        n_ei_candidates: candidates drawn from the good-points density per proposal.
        multivariate: model the knobs jointly (Optuna's multivariate TPE) or one by one.
        max_recent: past ``BEST + max_recent`` records, the model sees the ``BEST`` best and
            the ``max_recent`` most recent (see the module docstring).
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
        max_recent: int = 250,
    ) -> None:
        super().__init__(knob_config, seed=seed)
        for option, value in [
            ("n_startup_trials", n_startup_trials),
            ("n_ei_candidates", n_ei_candidates),
            ("max_recent", max_recent),
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StrategyError(f"tpe option {option}={value!r} must be a whole number >= 1")
        self.n_startup_trials = n_startup_trials
        self.n_ei_candidates = n_ei_candidates
        self.multivariate = bool(multivariate)
        self.max_recent = max_recent
        distributions = [
            _distribution(dim.kind, dim.low, dim.high, dim.log, len(dim.choices))
            for dim in self.search_space.dimensions
        ]
        # The dimensions with more than one value are modelled; the others take their one value.
        self._modelled = {
            dim.name: (j, dist)
            for j, (dim, dist) in enumerate(zip(self.search_space.dimensions, distributions, strict=True))
            if not dist.single()
        }
        self._fixed = [_single_value(dist) if dist.single() else None for dist in distributions]

    def model_ids(self) -> list[int]:
        """The trial ids of the records a proposal's model sees, ascending: every one up to
        ``BEST + max_recent`` records, else the ``BEST`` best-scored and the ``max_recent`` most recent."""
        if self.n_observed <= BEST + self.max_recent:
            return self.recent(self.n_observed)
        return sorted({*self.best(BEST), *self.recent(self.max_recent)})

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        pending = list(pending)
        rng = self.rng(trial_id)
        taken = self.taken(pending) if self.search_space.is_discrete else TakenPoints({}, ())
        if self.n_observed < self.n_startup_trials or not self._modelled:
            return self.search_space.unflatten(self.sample_new(rng, taken))
        below, above = self._split(pending)
        random_state = np.random.RandomState(int(rng.integers(2**31)))
        groups = [self._modelled] if self.multivariate else [{name: dim} for name, dim in self._modelled.items()]
        estimators = [
            (
                space,
                _ParzenEstimatorScipy(_observations(below, space), _space(space), _PARAMETERS),
                _ParzenEstimatorScipy(_observations(above, space), _space(space), _PARAMETERS),
            )
            for space in groups
        ]
        for attempt in range(_RETRIES + 1):
            size = self.n_ei_candidates * _RETRY_GROWTH**attempt
            point = list(self._fixed)
            for space, good, bad in estimators:
                samples = good.sample(random_state, size)
                values = good.log_pdf(samples) - bad.log_pdf(samples)
                columns = {name: _external(samples[name], dist) for name, (_, dist) in space.items()}
                if len(space) == len(self._modelled) and len(taken):
                    # Only a joint draw of every knob can tell a taken point.
                    candidates = self._points(columns, size)
                    values = np.where([candidate in taken for candidate in candidates], -np.inf, values)
                best = int(np.argmax(values))
                for name, (j, _) in space.items():
                    point[j] = columns[name][best]
            if tuple(point) not in taken:
                return self.search_space.unflatten(tuple(point))
        return self.search_space.unflatten(self.sample_new(rng, taken))

    def _split(self, pending: list[Knobs]) -> tuple[np.ndarray, np.ndarray]:
        """The flat points of the good group and of the rest (with the pending trials last), each by trial id.

        As Optuna's ``_split_trials``: the good group is the ``gamma(n)`` best-scored records,
        filled up with the earliest failed ones when fewer completed."""
        ids = self.model_ids()
        n_below = default_gamma(len(ids))
        # The model sees the BEST best records, so its best n_below (at most BEST) are the history's.
        below = set(self.best(n_below))
        if len(below) < n_below:
            below.update([i for i in ids if self.status(i) is not TrialStatus.COMPLETED][: n_below - len(below)])
        width = len(self.search_space)
        good = np.array([self.point(i) for i in ids if i in below], dtype=float).reshape(-1, width)
        rest = [self.point(i) for i in ids if i not in below] + [self.search_space.flatten(k) for k in pending]
        return good, np.array(rest, dtype=float).reshape(-1, width)

    def _points(self, columns: dict[str, list[int | float]], size: int) -> list[FlatPoint]:
        """Full flat points of joint candidates (every modelled knob drawn)."""
        points = []
        for k in range(size):
            point = list(self._fixed)
            for name, (j, _) in self._modelled.items():
                point[j] = columns[name][k]
            points.append(tuple(point))
        return points


class _ParzenEstimatorScipy(_ParzenEstimator):
    """Optuna's Parzen estimator, its log density evaluated with SciPy's vectorised ``log_ndtr``.

    The same mixture and the same formulas as Optuna's ``_MixtureOfProductDistribution.log_pdf``
    (Optuna 5.0): a categorical kernel's weight, a truncated normal's density, or for an
    integer its mass over the step around the value, each normalised by the mass within
    the bounds (after the log where the knob says ``log``); summed over knobs, mixed over
    kernels. Optuna invites a subclass of ``_ParzenEstimator`` (``TPESampler._parzen_estimator_cls``).
    """

    def log_pdf(self, samples_dict: dict[str, np.ndarray]) -> np.ndarray:
        mixture = self._mixture_distribution
        x = self._transform(samples_dict)
        out = np.zeros((len(x), len(mixture.weights)))
        for i, d in enumerate(mixture.distributions):
            if isinstance(d, _BatchedCategoricalDistributions):
                out += np.log(d.weights[:, x[:, i].astype(np.int64)]).T
                continue
            inside = _log_gauss_mass((d.adapted_low - d.mu) / d.sigma, (d.adapted_high - d.mu) / d.sigma)
            if d.step == 0.0:
                xi = (np.log(x[:, i]) if d.is_log else x[:, i])[:, np.newaxis]
                z = (xi - d.mu) / d.sigma
                log_pdf = -(z**2) / 2.0 - _LOG_SQRT_2PI - inside - np.log(d.sigma)
                out += np.where((xi < d.adapted_low) | (xi > d.adapted_high), -np.inf, log_pdf)
            else:
                left, right = x[:, i] - d.step / 2, x[:, i] + d.step / 2
                if d.is_log:
                    left, right = np.log(left), np.log(right)
                out += _log_gauss_mass((left[:, None] - d.mu) / d.sigma, (right[:, None] - d.mu) / d.sigma) - inside
        with np.errstate(divide="ignore"):  # a zero weight, as Optuna's log(0)
            return np.asarray(logsumexp(out + np.log(mixture.weights), axis=1))


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_gauss_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a <= b, computed in the left tail as Optuna's ``_truncnorm._log_gauss_mass``."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    out = np.empty(a.shape)
    left, right = b <= 0, a > 0
    central = ~(left | right)
    with np.errstate(divide="ignore", invalid="ignore"):  # an empty interval: log(0), as Optuna's
        out[left] = _log_diff(log_ndtr(b[left]), log_ndtr(a[left]))
        out[right] = _log_diff(log_ndtr(-a[right]), log_ndtr(-b[right]))
        out[central] = np.log1p(-ndtr(a[central]) - ndtr(-b[central]))
    return out


def _log_diff(log_p: np.ndarray, log_q: np.ndarray) -> np.ndarray:
    """log(p - q) from log p and log q."""
    return log_p + np.log1p(-np.exp(log_q - log_p))


def _space(space: dict[str, tuple[int, BaseDistribution]]) -> dict[str, BaseDistribution]:
    return {name: dist for name, (_, dist) in space.items()}


def _observations(points: np.ndarray, space: dict[str, tuple[int, BaseDistribution]]) -> dict[str, np.ndarray]:
    """Optuna's internal representation of the points' modelled dimensions (a flat point's
    categorical index is the index of its choice, as for ``CategoricalDistribution(range(k))``)."""
    return {name: points[:, j] for name, (j, _) in space.items()}


def _external(values: np.ndarray, dist: BaseDistribution) -> list[int | float]:
    """Flat values from Optuna's internal representation: ints for indices and integers, floats otherwise."""
    if isinstance(dist, FloatDistribution):
        return [float(v) for v in values]
    return [int(dist.to_external_repr(v)) for v in values]


def _single_value(dist: BaseDistribution) -> int | float:
    if isinstance(dist, CategoricalDistribution):
        return 0
    assert isinstance(dist, IntDistribution | FloatDistribution)
    return dist.low


def _distribution(kind: DimensionKind, low: float, high: float, log: bool, n_choices: int) -> BaseDistribution:
    """Optuna's distribution for a dimension; categorical ones range over choice indices."""
    if kind is DimensionKind.CATEGORICAL:
        # Indices, not the choices: Optuna finds a choice with ``==``, which takes True for 1.
        return CategoricalDistribution(list(range(n_choices)))
    if kind is DimensionKind.INTEGER:
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(low, high, log=log)
