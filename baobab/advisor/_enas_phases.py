"""The ENAS cycle as a planner: which phase the next trial of an ENAS search is in.

ENAS (Pham et al. 2018) alternates two steps: train the shared weights of the
super-network on architectures the controller samples, then score sampled
architectures with those weights and update the controller with the scores. Near the
end, the controller's most likely architectures are scored on the whole validation set
and the best one is trained from scratch at full size. In Baobab each step is a trial:

==================  ===============================================  =============================================
phase               policies                                         what the trial does
==================  ===============================================  =============================================
``train_shared``    SHARE_PARAMS, DOWNSCALE, EARLY_STOP              trains the shared weights briefly, downscaled
``evaluate``        SHARE_PARAMS, DOWNSCALE, SKIP_TRAIN, QUICK_EVAL  scores a sample; the controller learns
``final_evaluate``  SHARE_PARAMS, DOWNSCALE, SKIP_TRAIN              scores a top architecture on all of val
``final_train``     none                                             trains the best one from scratch, full size
==================  ===============================================  =============================================

The caller (the job driver) keeps, per trial, its phase (in the trial's metadata, and in
the :class:`~baobab.advisor.TrialRecord` it hands to the strategy as
``metadata={"phase": ...}``) and gives every trial that has SHARE_PARAMS the parameters
of the latest shared weights (none for the first): those of the latest finished
``train_shared`` trial, or, when several ran at once, their updates added up (see
:mod:`baobab.advisor.driver._shared_weights`). The planner is pure:
it sees counts and durations per phase in an :class:`EnasProgress` and answers an
:class:`EnasStep`, so a restarted driver plans on from the store.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Policy, PolicyKnob

__all__ = [
    "PHASE_POLICIES",
    "PLANNER_OPTIONS",
    "EnasPhase",
    "EnasPlanner",
    "EnasProgress",
    "EnasStep",
    "check_planner_option",
    "phase_policies",
]


class EnasPhase(enum.StrEnum):
    TRAIN_SHARED = "train_shared"
    EVALUATE = "evaluate"
    FINAL_EVALUATE = "final_evaluate"
    FINAL_TRAIN = "final_train"


#: The policies each phase switches on; every other policy is off.
PHASE_POLICIES: dict[EnasPhase, frozenset[Policy]] = {
    EnasPhase.TRAIN_SHARED: frozenset({Policy.SHARE_PARAMS, Policy.DOWNSCALE, Policy.EARLY_STOP}),
    EnasPhase.EVALUATE: frozenset({Policy.SHARE_PARAMS, Policy.DOWNSCALE, Policy.SKIP_TRAIN, Policy.QUICK_EVAL}),
    EnasPhase.FINAL_EVALUATE: frozenset({Policy.SHARE_PARAMS, Policy.DOWNSCALE, Policy.SKIP_TRAIN}),
    EnasPhase.FINAL_TRAIN: frozenset(),
}

#: Policies an ENAS search cannot do without: the evaluations must use the shared weights untouched.
_REQUIRED = (Policy.SHARE_PARAMS, Policy.SKIP_TRAIN)


def phase_policies(phase: EnasPhase | str) -> dict[Policy, bool]:
    """Every policy to whether ``phase`` switches it on (``trial_policies`` keeps those the template declares)."""
    on = PHASE_POLICIES[EnasPhase(phase)]
    return {policy: policy in on for policy in Policy}


@dataclass(frozen=True)
class EnasProgress:
    """Where a search stands: trials started and finished per phase, run times, time spent.

    ``started`` counts every trial row of the phase (whatever became of it), ``finished``
    those no longer running, ``durations`` the run times (seconds) of finished ones.
    """

    started: Mapping[EnasPhase, int] = field(default_factory=dict)
    finished: Mapping[EnasPhase, int] = field(default_factory=dict)
    durations: Mapping[EnasPhase, Sequence[float]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def count(self, phase: EnasPhase, *, finished: bool = False) -> int:
        return int((self.finished if finished else self.started).get(phase, 0))

    def median_s(self, phase: EnasPhase) -> float:
        durations = self.durations.get(phase, ())
        return float(statistics.median(durations)) if durations else 0.0


@dataclass(frozen=True)
class EnasStep:
    """The planner's answer: the next trial's phase and policies, or start nothing (``phase`` None).

    ``done``: the search is over (its final training started); otherwise a None phase
    means wait until a running trial finishes.
    """

    phase: EnasPhase | None
    reason: str
    done: bool = False

    @property
    def policies(self) -> dict[Policy, bool]:
        return phase_policies(self.phase) if self.phase is not None else {}


class EnasPlanner:
    """Plans an ENAS search's trials within a trial count, a time budget, or both.

    Before the final phases, the search runs cycles of ``train_trials`` shared-weight
    trainings then ``evaluate_trials`` evaluations, counted over the trials started (so
    parallel trials and restarts keep the rhythm). The first shared training runs alone
    (evaluations need trained weights, and trainings from scratch start from different
    weights, so their updates could not add up). With ``warmup_fraction`` set, the first
    :meth:`warmup_trials` trials are all shared trainings: the controller learns nothing
    until the shared weights have had them (the architectures are the untrained
    controller's samples, close to uniform, as ENAS warms its shared weights); the cycles
    then count from there. The final phases (``top_k`` final evaluations, once every shared
    training has finished, then the final training once they have all finished) start once
    the trials left are exactly those, or once the time left is at most the larger of
    ``final_fraction`` of the time budget and the estimated time of the final phases:
    ``ceil(top_k / workers)`` evaluations at ``final_evaluate_factor`` times the median
    evaluation (the whole validation set instead of a sample), then a training at
    ``final_train_factor`` times the median shared training (all epochs, full size,
    instead of a few epochs downscaled).

    Args:
        knob_config: the template's; it must declare SHARE_PARAMS and SKIP_TRAIN policy knobs.
        trial_budget: the trials the search may run (MODEL_TRIAL_COUNT), or None.
        time_budget_s: the seconds it may take (TIME_HOURS), or None.
        workers: how many trials run at once.
        train_trials: shared trainings per cycle.
        evaluate_trials: evaluations per cycle (each one controller update).
        top_k: final evaluations (the controller's most likely architectures).
        warmup_fraction: the share of the budget spent warming the shared weights first.

    The defaults of those four are what ``bench/enas_fashion_mnist.py --tune`` found best on
    held-back seeds (100 to 102; ``bench/results/enas_fashion_mnist_tuning.md``): of six option
    sets on Fashion-MNIST with ``EnasCnn`` and 25 trials, one shared training and four
    evaluations per cycle, three final evaluations and no warm-up gave the most accurate
    final models (median validation accuracy 0.806; two trainings per cycle 0.780, two
    evaluations 0.789, a quarter of the budget warming 0.762 to 0.792).

    The four are a job's options too (``train_args.enas``, :data:`PLANNER_OPTIONS`).

    Raises:
        StrategyError: the template lacks a required policy, an option is out of range,
            or ``trial_budget`` leaves no room for one cycle and the final phases.
    """

    def __init__(
        self,
        knob_config: KnobConfig,
        *,
        trial_budget: int | None = None,
        time_budget_s: float | None = None,
        workers: int = 1,
        train_trials: int = 1,
        evaluate_trials: int = 4,
        top_k: int = 3,
        warmup_fraction: float = 0.0,
        final_fraction: float = 0.2,
        final_evaluate_factor: float = 3.0,
        final_train_factor: float = 8.0,
    ) -> None:
        declared = {knob.policy for knob in knob_config.values() if isinstance(knob, PolicyKnob)}
        missing = [policy.value for policy in _REQUIRED if policy.value not in declared]
        if missing:
            raise StrategyError(
                f"an ENAS search needs a template that supports {' and '.join(missing)}: "
                f"declare {', '.join(f'PolicyKnob({p!r})' for p in missing)} in its knob config"
            )
        _check("workers", workers, _whole(workers) and workers >= 1, "a whole number >= 1")
        options = {
            "train_trials": train_trials,
            "evaluate_trials": evaluate_trials,
            "top_k": top_k,
            "warmup_fraction": warmup_fraction,
        }
        for name, value in options.items():
            check_planner_option(name, value)
        _check("final_fraction", final_fraction, _number(final_fraction) and 0 <= final_fraction < 1, "in [0, 1)")
        factors = {"final_evaluate_factor": final_evaluate_factor, "final_train_factor": final_train_factor}
        for name, value in factors.items():
            _check(name, value, _number(value) and value >= 0, "a number >= 0")
        if time_budget_s is not None:
            _check("time_budget_s", time_budget_s, _number(time_budget_s) and time_budget_s > 0, "a number > 0")
        if trial_budget is not None:
            least = train_trials + evaluate_trials + top_k + 1
            if not _whole(trial_budget) or trial_budget < least:
                raise StrategyError(
                    f"MODEL_TRIAL_COUNT={trial_budget!r} is too small for an ENAS search: it needs at least {least} "
                    f"trials ({train_trials} + {evaluate_trials} for one cycle, {top_k} final evaluations and the "
                    "final training); raise it or lower top_k"
                )
        self.trial_budget = trial_budget
        self.time_budget_s = time_budget_s
        self.workers = workers
        self.train_trials = train_trials
        self.evaluate_trials = evaluate_trials
        self.top_k = top_k
        self.warmup_fraction = float(warmup_fraction)
        self.final_fraction = float(final_fraction)
        self.final_evaluate_factor = float(final_evaluate_factor)
        self.final_train_factor = float(final_train_factor)

    def final_reserve_s(self, progress: EnasProgress) -> float:
        """Seconds kept for the final phases (0 without a time budget)."""
        if self.time_budget_s is None:
            return 0.0
        rounds = math.ceil(self.top_k / self.workers)
        evaluations = rounds * self.final_evaluate_factor * progress.median_s(EnasPhase.EVALUATE)
        training = self.final_train_factor * progress.median_s(EnasPhase.TRAIN_SHARED)
        return max(self.final_fraction * self.time_budget_s, evaluations + training)

    def next(self, progress: EnasProgress) -> EnasStep:
        """The phase of the trial to start now."""
        if progress.count(EnasPhase.FINAL_TRAIN):
            return EnasStep(None, "the final training has started: the search is over", done=True)
        final = progress.count(EnasPhase.FINAL_EVALUATE)
        if final or self._final_due(progress):
            training = progress.count(EnasPhase.TRAIN_SHARED) - progress.count(EnasPhase.TRAIN_SHARED, finished=True)
            if not final and training:  # the final ranking reads the shared weights with every update in
                return EnasStep(None, f"waiting for {training} shared trainings before the final evaluations")
            if final < self.top_k:
                return EnasStep(EnasPhase.FINAL_EVALUATE, f"final evaluation {final + 1} of {self.top_k}")
            running = final - progress.count(EnasPhase.FINAL_EVALUATE, finished=True)
            if running:
                return EnasStep(None, f"waiting for {running} final evaluations before the final training")
            return EnasStep(EnasPhase.FINAL_TRAIN, "train the best architecture from scratch at full size")
        trained = progress.count(EnasPhase.TRAIN_SHARED)
        evaluated = progress.count(EnasPhase.EVALUATE)
        if not progress.count(EnasPhase.TRAIN_SHARED, finished=True):
            if trained:  # trainings from scratch start from different weights: their updates would not add up
                return EnasStep(None, "waiting for the first shared training")
            return EnasStep(EnasPhase.TRAIN_SHARED, "no shared weights are trained yet")
        warm = self.warmup_trials(progress)
        cycle = evaluated // self.evaluate_trials
        if trained < max(warm, self.train_trials) + self.train_trials * cycle:
            if trained < warm:
                return EnasStep(EnasPhase.TRAIN_SHARED, f"warming the shared weights: training {trained + 1} of {warm}")
            return EnasStep(EnasPhase.TRAIN_SHARED, f"shared training {trained + 1} (cycle {cycle + 1})")
        return EnasStep(EnasPhase.EVALUATE, f"evaluation {evaluated + 1} ({trained} shared trainings so far)")

    def warmup_trials(self, progress: EnasProgress) -> int:
        """How many shared trainings warm the weights before the first evaluation (0: none; they stand in
        for the first cycle's ``train_trials`` when more): ``warmup_fraction`` of the
        search's trials (the trial budget less the final phases' trials), or of the trainings that
        fit in the time budget at the median shared training so far (on every worker), the fewer."""
        if not self.warmup_fraction:
            return 0
        counts = []
        if self.trial_budget is not None:
            counts.append(int(self.warmup_fraction * (self.trial_budget - self.top_k - 1)))
        median = progress.median_s(EnasPhase.TRAIN_SHARED)
        if self.time_budget_s is not None and median > 0:
            counts.append(int(self.warmup_fraction * self.time_budget_s * self.workers / median))
        return min(counts, default=0)

    def _final_due(self, progress: EnasProgress) -> bool:
        if self.trial_budget is not None:
            searched = progress.count(EnasPhase.TRAIN_SHARED) + progress.count(EnasPhase.EVALUATE)
            if searched >= self.trial_budget - self.top_k - 1:
                return True
        if self.time_budget_s is not None:
            return self.time_budget_s - progress.elapsed_s <= self.final_reserve_s(progress)
        return False


#: The options a job may set for the planner (``train_args.enas``), each with its rule: the one
#: home of those rules, for the planner and for the job's options alike.
PLANNER_OPTIONS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "train_trials": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "evaluate_trials": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "top_k": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
    "warmup_fraction": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
}


def check_planner_option(name: str, value: object) -> None:
    """Raises StrategyError when ``value`` breaks the rule of planner option ``name`` (:data:`PLANNER_OPTIONS`)."""
    ok, rule = PLANNER_OPTIONS[name]
    _check(name, value, ok(value), rule)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(name: str, value: object, ok: bool, rule: str) -> None:
    if not ok:
        raise StrategyError(f"enas planner option {name}={value!r} must be {rule}")
