"""The placement planner as the job driver asks it: whose trials start in the slot that is free, and how
many of them run fused.

The driver knows units of work and slots, not where they run, so the planner plays the
slots free now as one machine, each job limited to the units it may still start (its
cap less those it runs). What the jobs will run is forecast from what they ran: each
sub-job wanting trials brings its next ones (a few per slot of its job, or those left
of its trial count), each like one of its latest completed trials in turn, with the
fusion profile it measured, and under early stopping for the share of its epochs the
rule is expected to let run. The plan's launches that start at once are the answer, in
its order: each one's job, sub-job, and size as the limit of the group the driver forms. A sub-job with no
completed trial yet is taken to run trials as long as the median of the others', alone
(the job's placement says so); where no sub-job that wants trials has one, the planner
has nothing to weigh and answers None, so the driver's fixed rules decide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from baobab.advisor._plans import PlanStep
from baobab.advisor._scheduling import JobState, SubJobState
from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._forecast import stopped_share
from baobab.advisor.placement._search import Choice, choose_plan
from baobab.advisor.placement._work import Job, Machine, Pending

__all__ = ["Decision", "Outlook", "Planner"]

T = TypeVar("T")

#: The structure every forecast trial of a sub-job is taken to have (see the module docstring).
_STRUCTURE = ""


@dataclass(frozen=True)
class Outlook:
    """What the planner last told of a job: what it could not weigh (``fallback``: why the rules place
    its trials, or that their times are guessed), when its trials in the plan end (``finish_in_s``
    from the decision) and how busy the plan keeps the slots."""

    fallback: str | None = None
    finish_in_s: float | None = None
    utilisation: float | None = None


@dataclass(frozen=True)
class Decision:
    """Start a unit of ``sub``'s trials (of ``job``) of at most ``size`` trials; ``choice`` is the plan."""

    job: JobState
    sub: SubJobState
    size: int
    choice: Choice


class Planner:
    """The driver's planner: its cost model, fed with the trials the sub-jobs complete.

    Args:
        method: ``search`` or a baseline's name (:data:`~baobab.advisor.placement.METHODS`).
        budget_s: the search's time bound per decision.
        horizon: trials each job brings to a plan per slot it may take.
    """

    def __init__(self, method: str, *, budget_s: float = 0.05, horizon: int = 4) -> None:
        self.method, self.budget_s, self.horizon = method, budget_s, horizon
        self.cost = CostModel()
        self._fed: dict[int, int] = {}  # sub-job id -> timings fed
        self.last: Choice | None = None
        #: The last decision's outlook of each job that wanted a slot then.
        self.outlooks: dict[int, Outlook] = {}

    def decide(self, jobs: Iterable[JobState], now: float, *, free: int, ahead: int = 0) -> list[Decision]:
        """The units to start in the ``free`` slots now, in the plan's order (one plan for them all); none
        when nobody wants a slot or the rules decide."""
        wanting: list[tuple[JobState, int, list[SubJobState]]] = []
        for job in jobs:
            room = job.cap * (1 + ahead) - job.units
            subs = [sub for sub in job.sub_jobs.values() if isinstance(sub.next_step(job, now), PlanStep)]
            if room > 0 and subs:
                wanting.append((job, room, subs))
        self.outlooks = {}
        if not wanting or free <= 0:
            return []
        for _, _, subs in wanting:
            for sub in subs:
                self._feed(sub)
        unknown = {sub.id: sub for _, _, subs in wanting for sub in subs if not self.cost.knows(_kind(sub))}
        if len(unknown) == sum(len(subs) for _, _, subs in wanting):
            names = ", ".join(f"{sub.model_name} (sub-job {sub.id})" for sub in unknown.values())
            fallback = f"no completed trial of {names} yet: the fixed rules place the trials"
            self.outlooks = {job.id: Outlook(fallback=fallback) for job, _, _ in wanting}
            return []
        pending, owners = self._forecast(wanting)
        limits = {
            job.id: Job(
                job.id,
                cap=room,
                deadline=math.inf if job.deadline is None else max(0.0, job.deadline - now),
                max_group=subs[0].options.largest_group(measured=any(sub.profiles for sub in subs)),
            )
            for job, room, subs in wanting
        }
        machines = [Machine("slots", cores=free, slots=free)]
        choice = choose_plan(
            pending, machines=machines, jobs=limits, cost=self.cost, method=self.method, budget_s=self.budget_s
        )
        self.last = choice
        assert choice.outcome is not None  # every kind is known
        outcome = choice.outcome
        self.outlooks = {
            job.id: Outlook(
                fallback=_guessed([sub for sub in subs if sub.id in unknown]),
                finish_in_s=outcome.job_finish.get(job.id),
                utilisation=outcome.utilisation,
            )
            for job, _, subs in wanting
        }
        now_launches = [launch for launch, start in zip(choice.plan, outcome.starts, strict=True) if start == 0.0]
        return [Decision(*owners[launch.trials[0]], len(launch.trials), choice) for launch in now_launches[:free]]

    def _feed(self, sub: SubJobState) -> None:
        """Gives the cost model the sub-job's timings it has not seen, and its latest fusion profile."""
        new = sub.timed - self._fed.get(sub.id, 0)
        for proposal, seconds, group in list(sub.timings)[-new:] if new > 0 else ():
            self.cost.observe(_kind(sub), _STRUCTURE, proposal, seconds=seconds, group=group)
        self._fed[sub.id] = sub.timed
        if sub.profiles:
            _, rates = list(sub.profiles.values())[-1]
            self.cost.observe_profile(_kind(sub), _STRUCTURE, rates)

    def _forecast(
        self, wanting: list[tuple[JobState, int, list[SubJobState]]]
    ) -> tuple[list[Pending], dict[int, tuple[JobState, SubJobState]]]:
        """The trials each job would start next, in the order the fixed rules would start them: jobs in
        turn, oldest first, and within a job its sub-jobs in turn."""
        queues: list[list[tuple[JobState, SubJobState, dict[str, Any], float]]] = []
        for job, room, subs in sorted(wanting, key=lambda w: (w[0].created_at, w[0].id)):
            per_sub = []
            for sub in subs:
                left = math.inf if sub.trial_count is None else sub.trial_count - sub.trials
                count = max(1, int(min(left, self.horizon * room)))  # it wants one: a plan's step past the count
                samples = [dict(proposal) for proposal, _, _ in sub.timings] or [{}]  # {}: guessed anyway
                rule = sub.options.stopping_rule_for()
                shares = [stopped_share(rule, knobs) for knobs in samples]
                per_sub.append([(job, sub, samples[k % len(samples)], shares[k % len(samples)]) for k in range(count)])
            queues.append(_interleave(per_sub))
        pending: list[Pending] = []
        owners: dict[int, tuple[JobState, SubJobState]] = {}
        for job, sub, knobs, share in _interleave(queues):
            owners[len(pending)] = (job, sub)
            pending.append(Pending(len(pending), job.id, _kind(sub), _STRUCTURE, knobs, fraction=share))
        return pending, owners


def _guessed(subs: list[SubJobState]) -> str | None:
    """What the outlook of a job with sub-jobs of no completed trial says of them."""
    if not subs:
        return None
    names = ", ".join(f"{sub.model_name} (sub-job {sub.id})" for sub in subs)
    return f"no completed trial of {names} yet: its trials are taken to last the median of the others'"


def _kind(sub: SubJobState) -> str:
    return f"sub-job {sub.id}"


def _interleave(lists: list[list[T]]) -> list[T]:
    """The lists' items in turn: the first of each, then the second of each, and so on."""
    out: list[T] = []
    for k in range(max((len(items) for items in lists), default=0)):
        out.extend(items[k] for items in lists if k < len(items))
    return out
