"""Which phase and policies a sub-job's next trial runs with: the driver's per-sub-job plans.

A plan answers, from a sub-job's counts and the job's clock, one of three things: a
:class:`PlanStep` (start a trial with this phase, these policies and, where the plan
chooses them, these knobs), :attr:`Outcome.WAIT` (start nothing until a running trial
ends) or :attr:`Outcome.DONE` (this sub-job starts no more trials). Three plans:

- :class:`PlainPlan`: every trial alike (SHARE_PARAMS on when the job asks for it).
- :class:`RetrainPlan`: the job asks for EARLY_STOP or DOWNSCALE (see
  :mod:`baobab.advisor._job_options`) and the template declares one of them:
  ``search`` trials run with them on (and are not served); then a
  ``final`` phase retrains the best configurations with every policy off, once the
  search trials have all ended. It is due when the trials left are the final ones, when
  the time left is at most the reserve (``final_fraction`` of TIME_HOURS, or
  ``final_factor`` times the median search trial per round of final trials if longer),
  or once the time budget ran out: final trials run past the deadline (only a user's
  stop ends them early), so a short budget still ends with a full-length trial.
- :class:`EnasPlan`: the ENAS cycle of :class:`~baobab.advisor.EnasPlanner`; its final
  phases run past the deadline the same way.

Plans are pure like the rest of :mod:`baobab.advisor._scheduling`: a restarted driver
that rebuilt the counts from the trial rows gets the same answers. They read the driver's
job and sub-job through :class:`PlanJob` and :class:`PlanSubJob`, what a plan needs of
them, so that this module imports nothing of the scheduling state that holds plans.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from baobab.advisor._durations import RecentDurations
from baobab.advisor._enas_phases import EnasPhase, EnasPlanner, EnasProgress, phase_policies
from baobab.advisor._job_options import JobOptions
from baobab.model import Knobs, Policy

__all__ = [
    "EnasPlan",
    "Outcome",
    "Plan",
    "PlainPlan",
    "PlanJob",
    "PlanStep",
    "PlanSubJob",
    "RetrainPhase",
    "RetrainPlan",
    "StopCause",
    "options_plan",
]


class RetrainPhase(enum.StrEnum):
    """The phases of a :class:`RetrainPlan`, as ``trials.phase`` stores them."""

    SEARCH = "search"
    FINAL = "final"


class StopCause(enum.StrEnum):
    """Why a job takes no more trials before its trial counts are reached."""

    TIME = "TIME"  # its TIME_HOURS budget ended
    USER = "USER"  # a user stopped it


#: Policies whose trials are not full models: never served, never a final answer. An
#: EARLY_STOP trial trains for fewer epochs than the model it stands for; its retrain serves.
REDUCED: Final = frozenset({Policy.EARLY_STOP, Policy.DOWNSCALE, Policy.QUICK_EVAL, Policy.SKIP_TRAIN})


@dataclass(frozen=True)
class PlanStep:
    """Start a trial: its ``phase`` (None for a plain trial), the ``policies`` to switch on, ``proposal``
    when the plan chooses the knobs, and ``final`` when it runs even after the time budget ended."""

    phase: enum.StrEnum | None
    policies: Mapping[Policy, bool] = field(default_factory=dict)
    proposal: Knobs | None = None
    final: bool = False


class Outcome(enum.Enum):
    """A plan's answer when it starts no trial."""

    WAIT = "WAIT"  # start nothing until a running trial ends
    DONE = "DONE"  # this sub-job starts no more trials


Next = PlanStep | Outcome


class PlanJob(Protocol):
    """What a plan reads of the driver's job (:class:`~baobab.advisor._scheduling.JobState`)."""

    started_at: float
    cap: int
    deadline: float | None
    time_hours: float | None
    stop_cause: StopCause | None

    def may_start(self, now: float) -> bool: ...


class PlanSubJob(Protocol):
    """What a plan reads of the driver's sub-job (:class:`~baobab.advisor._scheduling.SubJobState`)."""

    failure: str | None
    trial_count: int | None
    started: Counter[str | None]
    finished: Counter[str | None]
    durations: dict[str | None, RecentDurations]

    @property
    def ended(self) -> bool: ...

    def wants_trials(self) -> bool: ...

    def best_configs(self, n: int) -> list[Knobs]: ...


def servable(policies: Mapping[str, Any]) -> bool:
    """Whether a trial run with ``policies`` is a full model (none of the :data:`REDUCED` policies on)."""
    return not any(policies.get(policy) for policy in REDUCED)


class Plan:
    """The plan interface: :meth:`next`; ``share_phases`` are the phases whose parameters are shared on."""

    #: Phases whose finished trials' parameters later trials may start from (SHARE_PARAMS).
    share_phases: frozenset[str | None] = frozenset({None, RetrainPhase.SEARCH})
    #: Phases the early-stopping rule watches.
    ruled_phases: frozenset[str | None] = frozenset({None, RetrainPhase.SEARCH})
    #: Phases whose trials run past the time budget (only a user's stop ends them early).
    final_phases: frozenset[str | None] = frozenset()
    #: Phases whose records the strategy learns from (ENAS filters by phase itself).
    observed_phases: frozenset[str | None] | None = frozenset({None, RetrainPhase.SEARCH})
    #: Whether trials that trained shared weights at the same time add their updates up (one set of
    #: weights all of them train) rather than the last to finish replacing the others' (one trial's
    #: parameters, handed on as they are).
    adds_updates: bool = False

    def next(self, sub: PlanSubJob, job: PlanJob, now: float) -> Next:
        raise NotImplementedError


class PlainPlan(Plan):
    def __init__(self, options: JobOptions) -> None:
        self.policies = {Policy.SHARE_PARAMS: Policy.SHARE_PARAMS in options.policies}

    def next(self, sub: PlanSubJob, job: PlanJob, now: float) -> Next:
        if not sub.wants_trials() or not job.may_start(now):
            return Outcome.DONE
        return PlanStep(None, self.policies)


class RetrainPlan(Plan):
    """Cheap search trials, then the best configurations retrained in full (see the module docstring)."""

    final_phases: frozenset[str | None] = frozenset({RetrainPhase.FINAL})

    def __init__(self, options: JobOptions) -> None:
        self.options = options
        self.search_policies = {policy: True for policy in options.policies}

    def reserve_s(self, sub: PlanSubJob, job: PlanJob) -> float:
        """Seconds kept for the final phase (0 without a time budget)."""
        if job.time_hours is None:
            return 0.0
        durations = sub.durations.get(RetrainPhase.SEARCH)
        median = 0.0 if durations is None else durations.median()
        rounds = math.ceil(self.options.final_trials / max(1, job.cap))
        return max(self.options.final_fraction * job.time_hours * 3600, self.options.final_factor * median * rounds)

    def final_due(self, sub: PlanSubJob, job: PlanJob, now: float) -> bool:
        if sub.started[RetrainPhase.FINAL] or job.stop_cause is not None or not job.may_start(now):
            return True
        if (
            sub.trial_count is not None
            and sub.started[RetrainPhase.SEARCH] >= sub.trial_count - self.options.final_trials
        ):
            return True
        return job.deadline is not None and job.deadline - now <= self.reserve_s(sub, job)

    def next(self, sub: PlanSubJob, job: PlanJob, now: float) -> Next:
        if sub.failure is not None or sub.ended or job.stop_cause is StopCause.USER:
            return Outcome.DONE
        if not self.final_due(sub, job, now):
            return PlanStep(RetrainPhase.SEARCH, self.search_policies) if sub.wants_trials() else Outcome.DONE
        done = sub.started[RetrainPhase.FINAL]
        if done >= self.options.final_trials:
            return Outcome.DONE
        if sub.started[RetrainPhase.SEARCH] > sub.finished[RetrainPhase.SEARCH]:
            return Outcome.WAIT
        configs = sub.best_configs(self.options.final_trials)
        if done >= len(configs):
            return Outcome.DONE
        return PlanStep(RetrainPhase.FINAL, {}, proposal=configs[done], final=True)


class EnasPlan(Plan):
    """The ENAS cycle (:class:`~baobab.advisor.EnasPlanner`); proposals come from ``propose_for``."""

    share_phases = frozenset({EnasPhase.TRAIN_SHARED.value})
    adds_updates = True
    ruled_phases: frozenset[str | None] = frozenset()
    observed_phases = None
    final_phases: frozenset[str | None] = frozenset({EnasPhase.FINAL_EVALUATE, EnasPhase.FINAL_TRAIN})

    def __init__(self, planner: EnasPlanner) -> None:
        self.planner = planner

    def next(self, sub: PlanSubJob, job: PlanJob, now: float) -> Next:
        if sub.failure is not None or sub.ended or job.stop_cause is StopCause.USER:
            return Outcome.DONE
        elapsed = now - job.started_at
        if not job.may_start(now) and self.planner.time_budget_s is not None:
            elapsed = max(elapsed, self.planner.time_budget_s)  # out of time: straight to the final phases
        progress = EnasProgress(
            started={EnasPhase(p): n for p, n in sub.started.items() if p is not None},
            finished={EnasPhase(p): n for p, n in sub.finished.items() if p is not None},
            durations={EnasPhase(p): d for p, d in sub.durations.items() if p is not None},
            elapsed_s=elapsed,
        )
        step = self.planner.next(progress)
        if step.done:
            return Outcome.DONE
        if step.phase is None:
            return Outcome.WAIT
        final = step.phase in self.final_phases
        if not final and (not job.may_start(now) or not sub.wants_trials()):
            return Outcome.DONE
        return PlanStep(step.phase, phase_policies(step.phase), final=final)


def options_plan(options: JobOptions, declared: frozenset[Policy]) -> Plan:
    """The plan a job's ``options`` ask for, for a strategy that brings no plan of its own.

    A retrain phase only when the template ``declared`` a policy that makes its search
    trials cheaper: without one its search trials are full models already, and retraining
    the best of them would repeat them.
    """
    if options.reduced_search & declared:
        return RetrainPlan(options)
    return PlainPlan(options)
