"""The placement planner as the job driver asks it: whose trials start in the slot that is free, and how
many of them run fused.

The driver knows units of work and slots, not where they run, so the planner plays the
slots free now as one machine, each job limited to the units it may still start: its
share of the slots as the fixed rules split them (:func:`fair_shares`), within its cap,
less those it runs. So the plan decides the order, sub-jobs and fused groups of each
job's trials, and gives a job's slots to another only where it wants none.

What the jobs will run is forecast from what they ran: each sub-job wanting trials
brings its next ones (a few per slot of its job, or those left of its trial count), each
like one of its latest completed trials in turn, with the fusion profile it measured,
and under early stopping for the share of its epochs the rule is expected to let run.
The plan's launches that start at once are the answer, in its order: each one's job,
sub-job, and size as the limit of the group the driver forms. A sub-job with no
completed trial yet is taken to run trials as long as the median of the others', alone
(the job's placement says so); where no sub-job that wants trials has one, the planner
has nothing to weigh and answers None, so the driver's fixed rules decide.

Being the driver's default, a decision is kept cheap beside the work it places, however many
jobs and slots there are. It weighs only the jobs the fair rule would serve first (those wanting
a slot, fewest running units first, :data:`SPARE_JOBS` more than the slots free), each with at
most :data:`MOST_PER_SUB_JOB` trials per sub-job, and its search stops at the least of its own
bound, :data:`WORK_SHARE` of the slot-seconds it places (the free slots times the median trial),
and a share of the driver's thread (:data:`DRIVER_SHARE` of the time between decisions, which
come about as often as the median trial ends on one of the ``slots``). On 2 slots of one-second
trials that is 10 ms a decision; on 100 slots of one-minute trials, 12 ms; on 1,000, 1.2 ms,
about what playing its baselines takes. Where every plan would start the same units now (no
more jobs to serve than free slots, one sub-job wanting in each, no groups to form), no search
is run: the fixed rule's plan is played, for the outlook it gives.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from baobab._settings import Placement
from baobab.advisor._job_options import FusionMode
from baobab.advisor._plans import PlanStep
from baobab.advisor._scheduling import JobState, SubJobState
from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._forecast import stopped_share
from baobab.advisor.placement._search import Choice, choose_plan
from baobab.advisor.placement._work import Job, Machine, Pending

__all__ = [
    "DRIVER_SHARE",
    "MOST_PER_SUB_JOB",
    "SPARE_JOBS",
    "WORK_SHARE",
    "Decision",
    "Outlook",
    "Planner",
    "fair_shares",
]

T = TypeVar("T")

#: The structure every forecast trial of a sub-job is taken to have (see the module docstring).
_STRUCTURE = ""
#: Jobs weighed beyond the free slots, in the fair rule's order: those it would serve next.
SPARE_JOBS = 2
#: Forecast trials a sub-job brings to a plan at most: room for two groups of 16.
MOST_PER_SUB_JOB = 32
#: The share of the slot-seconds a decision places (the free slots times the median trial) it may take.
WORK_SHARE = 0.01
#: The share of the driver thread's time the decisions may take, at one decision per trial ended.
DRIVER_SHARE = 0.02


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
    """Start a unit of ``sub``'s trials (of ``job``) of at most ``size`` trials; ``choice`` is the plan.
    ``size`` is None where the job's fusion option fixes it (``max_group``'s K, or 1 when ``off``): a
    user who asked for groups of K gets them, whatever the cost model, which without a profile takes
    fusing to gain nothing."""

    job: JobState
    sub: SubJobState
    size: int | None
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

    def decide(
        self, jobs: Iterable[JobState], now: float, *, free: int, ahead: int = 0, slots: int | None = None
    ) -> list[Decision]:
        """The units to start in the ``free`` slots now (of ``slots`` in all; ``free`` when None), in the
        plan's order (one plan for them all); none when nobody wants a slot or the rules decide."""
        asking = {}
        for job in jobs:
            subs = [sub for sub in job.sub_jobs.values() if isinstance(sub.next_step(job, now), PlanStep)]
            asking[job.id] = (job, subs)
        limit = {job_id: job.cap * (1 + ahead) for job_id, (job, _) in asking.items()}
        total = (sum(job.units for job, _ in asking.values()) + free) if slots is None else slots * (1 + ahead)
        shares = fair_shares({job: (limit[job.id] if subs else job.units) for job, subs in asking.values()}, total)
        wanting: list[tuple[JobState, int, list[SubJobState]]] = []
        for job, subs in sorted(asking.values(), key=lambda a: (a[0].units, a[0].created_at, a[0].id)):
            room = min(limit[job.id], shares[job.id]) - job.units
            if room > 0 and subs:
                wanting.append((job, room, subs))
                if len(wanting) >= free + SPARE_JOBS:
                    break
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
        # With one job to serve per free slot, one sub-job each and no groups to form, every plan starts
        # the same units now: the fixed rule's is played for the outlook alone, and no search is paid for.
        choosing = len(wanting) > free or any(len(subs) > 1 or limits[job.id].max_group > 1 for job, _, subs in wanting)
        choice = choose_plan(
            pending,
            machines=machines,
            jobs=limits,
            cost=self.cost,
            method=self.method if choosing else Placement.FCFS,
            budget_s=self._budget(wanting, free, free if slots is None else slots),
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
        decisions = []
        for launch in now_launches[:free]:
            job, sub = owners[launch.trials[0]]
            size = len(launch.trials) if sub.options.fusion == FusionMode.AUTO else None  # else the option's K, or 1
            decisions.append(Decision(job, sub, size, choice))
        return decisions

    def _budget(self, wanting: list[tuple[JobState, int, list[SubJobState]]], free: int, slots: int) -> float:
        """The search's time bound for this decision (see the module docstring)."""
        seconds = [s for _, _, subs in wanting for sub in subs for _, s, _ in sub.timings]
        median = statistics.median(seconds) if seconds else 0.0
        return min(self.budget_s, median * free * min(WORK_SHARE, DRIVER_SHARE / max(1, slots)))

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
        """The trials each job would start next, in the order the fixed rules would start them: each next
        trial the job's with the fewest units running or before it in the order (ties: the oldest job),
        and within a job its sub-jobs in turn. ``wanting`` is in the fair rule's order."""
        queues: list[tuple[int, list[tuple[JobState, SubJobState, dict[str, Any], float]]]] = []
        for job, room, subs in wanting:
            per_sub = []
            for sub in subs:
                left = math.inf if sub.trial_count is None else sub.trial_count - sub.trials
                count = max(1, int(min(left, self.horizon * room, MOST_PER_SUB_JOB)))  # one: a step past the count
                samples = [dict(proposal) for proposal, _, _ in sub.timings] or [{}]  # {}: guessed anyway
                rule = sub.options.stopping_rule_for()
                shares = [stopped_share(rule, knobs) for knobs in samples]
                per_sub.append([(job, sub, samples[k % len(samples)], shares[k % len(samples)]) for k in range(count)])
            queues.append((job.units, _interleave(per_sub)))
        turns = [(units, rank, 0) for rank, (units, _) in enumerate(queues)]  # the fair rule's key, and the next
        heapq.heapify(turns)
        pending: list[Pending] = []
        owners: dict[int, tuple[JobState, SubJobState]] = {}
        while turns:
            units, rank, at = heapq.heappop(turns)
            job, sub, knobs, share = queues[rank][1][at]
            owners[len(pending)] = (job, sub)
            pending.append(Pending(len(pending), job.id, _kind(sub), _STRUCTURE, knobs, fraction=share))
            if at + 1 < len(queues[rank][1]):
                heapq.heappush(turns, (units + 1, rank, at + 1))
        return pending, owners


def fair_shares(demands: Mapping[JobState, int], total: int) -> dict[int, int]:
    """Each job's share of ``total`` units by the fixed rules: a unit at a time to the job with the
    fewest so far (ties: the oldest) among those below their demand (what they run, or their cap
    where they want more). A plan keeps each job within it, so that the planner decides the order,
    sub-jobs and groups of a job's trials, never one job's share against another's."""
    shares = dict.fromkeys((job.id for job in demands), 0)
    turns = [(0, job.created_at, job.id, demand) for job, demand in demands.items() if demand > 0]
    heapq.heapify(turns)
    for _ in range(total):
        if not turns:
            break
        given, created, job_id, demand = heapq.heappop(turns)
        shares[job_id] = given + 1
        if given + 1 < demand:
            heapq.heappush(turns, (given + 1, created, job_id, demand))
    return shares


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
