"""Bayesian optimisation: a Gaussian-process surrogate and expected improvement.

The surrogate is scikit-optimize's ``GaussianProcessRegressor`` (Matern 5/2 with one
length scale per feature, plus a fitted noise level) and the acquisition its
``gaussian_ei``; see Snoek, Larochelle and Adams, "Practical Bayesian Optimization of
Machine Learning Algorithms", NeurIPS 2012, for the method and the constant liar for
parallel proposals. Scores are replaced by the normal quantiles of their ranks before
the fit (the Gaussian copula of Salinas, Shen and Perrone, ICML 2020), which keeps a
few outliers from deciding the model.

Two choices keep one proposal within tens of milliseconds however long the search
runs, where skopt's ``Optimizer`` takes seconds past a hundred observations:

- the GP is fitted on a bounded subset of the observations, the ``n_best`` best and
  the ``n_recent`` most recent (a GP's cost grows with the cube of its data), read from
  the strategy's ranked and ordered history (``Strategy.best``, ``Strategy.recent``)
  without a walk over it, as the check of candidates against taken points is;
- expected improvement is maximised over a sampled candidate set (uniform points plus
  perturbations of the best points seen, at two scales for numeric knobs) instead of
  by L-BFGS restarts.

And two keep it flat however many trials are pending (a job on hundreds of slots asks
for hundreds of proposals at once, each with the ones before it pending):

- the kernel's hyperparameters are fitted on the observations alone, once per change of
  them (a new result), not once per proposal; each proposal then conditions a GP with
  those hyperparameters on the observations and its pending points (one Cholesky
  factorisation, no likelihood search);
- the constant liar takes the ``n_pending`` most recently proposed pending points; older
  ones still count as taken in a discrete space.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm, rankdata
from sklearn.exceptions import ConvergenceWarning
from skopt.acquisition import gaussian_ei
from skopt.learning import GaussianProcessRegressor
from skopt.learning.gaussian_process.kernels import ConstantKernel, Kernel, Matern

from baobab.advisor._base import Strategy, TrialStatus
from baobab.advisor._space import FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

__all__ = ["BayesStrategy"]

#: Standard deviations (in unit coordinates) of the perturbations around the best points;
#: the finer one only where a knob is numeric (a categorical is redrawn at any scale).
_LOCAL_SCALES = (0.1, 0.02)


class BayesStrategy(Strategy):
    """Bayesian optimisation with a GP surrogate (scikit-optimize) and expected improvement.

    Failed trials count as the worst score observed so far, so the model steers away
    from them rather than retrying them. Pending trials count the same way (a
    pessimistic constant liar), and in a discrete space points already observed or
    pending are never proposed again while new ones remain.

    Args:
        knob_config: the template's knob config.
        seed: makes proposals reproducible.
        n_initial_points: proposals drawn at random before the model is used.
        n_best: the best observations the GP is always fitted on.
        n_recent: the most recent observations it is fitted on besides.
        n_candidates: uniform random candidates per proposal.
        n_local: perturbations around each of the five best points per proposal (per
            scale: numeric knobs are perturbed at 0.1 and at 0.02 of their range).
        n_pending: the most recent pending points the constant liar fits on.
        xi: the exploration margin of expected improvement, in units of the score's spread.
    """

    name = "bayes"

    def __init__(
        self,
        knob_config: KnobConfig,
        *,
        seed: int | None = None,
        n_initial_points: int = 5,
        n_best: int = 20,
        n_recent: int = 30,
        n_candidates: int = 500,
        n_local: int = 100,
        n_pending: int = 50,
        xi: float = 0.01,
    ) -> None:
        super().__init__(knob_config, seed=seed)
        for option, value in [
            ("n_initial_points", n_initial_points),
            ("n_best", n_best),
            ("n_recent", n_recent),
            ("n_candidates", n_candidates),
            ("n_local", n_local),
            ("n_pending", n_pending),
        ]:
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if option == "n_candidates" else 0):
                raise StrategyError(f"bayes option {option}={value!r} must be a whole number >= 0 (n_candidates >= 1)")
        self.n_initial_points = n_initial_points
        self.n_best = n_best
        self.n_recent = n_recent
        self.n_candidates = n_candidates
        self.n_local = n_local
        self.n_pending = n_pending
        self.xi = float(xi)
        #: The signal kernel and noise level fitted last, and the training set they were fitted on.
        self._fitted: tuple[tuple[tuple[int, float], ...], Kernel, float | None] | None = None

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        pending = list(pending)
        rng = self.rng(trial_id)
        taken = self.taken(pending)
        worst = self.worst_score()
        if not len(self.search_space) or self.n_observed < self.n_initial_points or worst is None:
            return self.search_space.unflatten(self.sample_new(rng, taken))

        observed = self._observed(worst)
        kernel, noise = self._hyperparameters(observed)
        liars = pending[-self.n_pending :] if self.n_pending else []
        x, y = self._training_set(observed, liars, worst)
        space = self.search_space
        # The hyperparameters are fixed (no optimizer): this fit is one Cholesky factorisation. Its random
        # state is drawn as when each proposal fitted them, so that the candidates after it are the same draws.
        model = GaussianProcessRegressor(
            kernel=kernel, normalize_y=True, noise=noise, optimizer=None, random_state=int(rng.integers(2**31))
        )
        model.fit(x, -y)  # skopt minimises

        units = self._candidates(rng, taken)
        if not len(units):
            return self.search_space.unflatten(self.sample_new(rng, taken))
        ei = gaussian_ei(space.features(units), model, y_opt=-float(np.max(y)), xi=self.xi)
        return space.unflatten(space.from_unit(units[int(np.argmax(ei))]))

    def _observed(self, worst: float) -> tuple[tuple[int, float], ...]:
        """The records the GP is fitted on, as (trial id, score): the best and the most recent.

        A failed record counts as the worst score; the best are the ``n_best`` best-scored
        completed records, so a failure is fitted on only while it is among the ``n_recent``."""
        keep = sorted(set(self.best(self.n_best)) | set(self.recent(self.n_recent)))
        scores = (self.score(i) if self.status(i) is TrialStatus.COMPLETED else None for i in keep)
        return tuple((i, worst if score is None else score) for i, score in zip(keep, scores, strict=True))

    def _hyperparameters(self, observed: tuple[tuple[int, float], ...]) -> tuple[Kernel, float | None]:
        """The signal kernel and the noise level fitted on ``observed``: fitted again only when it changed."""
        if self._fitted is None or self._fitted[0] != observed:
            x, y = self._training_set(observed, [], 0.0)
            with warnings.catch_warnings():
                # A length scale that ends on its bound (a knob that does not matter) is an
                # expected outcome here, not a reason to stop.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = GaussianProcessRegressor(
                    kernel=ConstantKernel(1.0, (1e-2, 1e2)) * Matern(np.ones(x.shape[1]), (1e-2, 1e2), nu=2.5),
                    normalize_y=True,
                    noise="gaussian",
                    optimizer=_short_lbfgs,
                )
                model.fit(x, -y)
            # skopt zeroes the fitted white noise for predictions and keeps its level apart (``noise_``).
            self._fitted = (observed, model.kernel_.k1, model.noise_)
        return self._fitted[1], self._fitted[2]

    def _training_set(
        self, observed: tuple[tuple[int, float], ...], pending: list[Knobs], worst: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Features and scores of the observed points, and of the pending ones at the worst score."""
        points = [self.point(i) for i, _ in observed] + [self.search_space.flatten(k) for k in pending]
        y = np.array([score for _, score in observed] + [worst] * len(pending), dtype=float)
        # Scores as normal quantiles of their ranks: a few very bad scores (a diverged
        # training) would otherwise flatten the GP everywhere else.
        y = norm.ppf((rankdata(y) - 0.5) / len(y))
        return self.search_space.features(self.search_space.to_unit(points)), y

    def _candidates(self, rng: np.random.Generator, taken: AbstractSet[FlatPoint]) -> np.ndarray:
        """Snapped candidate points; in a discrete space, none observed or pending, none twice."""
        space = self.search_space
        top = space.to_unit([self.point(i) for i in self.best(5)])
        # Numeric knobs get a second, finer ring of perturbations: once the GP is sure
        # where the optimum lies, steps of a tenth of the range only jump over it.
        scales = _LOCAL_SCALES if space.categorical_fraction < 1.0 else _LOCAL_SCALES[:1]
        units = np.vstack(
            [space.sample_unit(rng, self.n_candidates)]
            + [space.perturb_unit(top, rng, self.n_local, scale) for scale in scales]
        )
        units = space.snap(units)
        if not space.is_discrete:
            return units
        seen: set[FlatPoint] = set()
        fresh = []
        for u, point in zip(units, space.points(units), strict=True):
            if point not in taken and point not in seen:
                seen.add(point)
                fresh.append(u)
        return np.array(fresh).reshape(len(fresh), len(space))


def _short_lbfgs(
    objective: Callable[[np.ndarray], tuple[float, np.ndarray]], theta: np.ndarray, bounds: np.ndarray
) -> tuple[np.ndarray, float]:
    """L-BFGS-B on the GP's log marginal likelihood, stopped after 20 iterations.

    The kernel's hyperparameters need not be exact for expected improvement to rank
    candidates well, and a full fit dominates the proposal time (one length scale
    per feature: 30 of them for six 5-way categoricals).
    """
    result = minimize(objective, theta, jac=True, bounds=bounds, method="L-BFGS-B", options={"maxiter": 20})
    return result.x, float(result.fun)
