"""The search over plans (FlexFlow's): simulated annealing from the best of the greedy baselines.

A plan is a sequence of launches. A move changes one thing — the order of two launches,
the machine of one, its threads, its devices, or its fusing (two launches of one job's
structure merged, one split) — and the simulator weighs the result. A better plan is
kept; a worse one is taken with the Metropolis probability ``exp(-delta / T)``, the
temperature falling to zero over the time bound, so the search can leave a local
optimum early and settles late. The best plan seen is the answer, so the search is never
worse than the baseline it started from.

A plan's energy, lower being better: its makespan plus the mean time at which its trials
end, plus a trial's worth of the whole
horizon for every trial it leaves unfinished at its job's deadline, plus ten times the
seconds by which any job would finish later than under today's fair rule (one trial per
slot, first come first served) — the fairness between jobs is kept as a limit, not traded —
and, to break ties, a trifle per fused trial: fusing that gains nothing is not chosen.
The mean end time is there because the driver plans again whenever a slot frees, over a
window of each job's next trials: on the makespan of such a window alone, the longest trials
went first at every decision, and a job of short trials waited behind them to the end (0.3 s
trials, in a run of bench/placement.py's gain part). Ending trials early is also what
trials per hour and a best score found sooner are made of.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from baobab._settings import Placement
from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._simulator import Outcome, simulate
from baobab.advisor.placement._work import Estimate, Job, Launch, Machine, Pending, Plan

__all__ = ["BASELINES", "METHODS", "Choice", "choose_plan", "estimator"]

#: How much later than under the fair rule a plan may finish a job without paying for it.
FAIR_SLACK = 1.05
#: How much a second of unfairness weighs against a second of makespan.
FAIR_WEIGHT = 10.0
#: A fused trial's weight, in horizons: it breaks ties only, so that fusing that gains nothing is not chosen.
FUSED_TIE = 1e-9


@dataclass(frozen=True)
class Choice:
    """A plan and why: the ``method`` asked for, the ``start`` baseline, the plans weighed
    (``steps``), and the simulator's ``outcome``; ``fallback`` says why no plan was weighed (no
    kind measured yet), in which case ``outcome`` is None; ``guessed`` names the kinds with no
    measurement, whose trials were taken to last the median of the measured ones."""

    plan: Plan
    method: str
    start: str
    steps: int
    outcome: Outcome | None
    fallback: str | None = None
    guessed: tuple[str, ...] = ()


def estimator(
    cost: CostModel, pending: Mapping[int, Pending], machines: Sequence[Machine], *, guess: float = 1.0
) -> Callable[[Launch], Estimate]:
    """A launch's estimate from the cost model (cached per launch): its slowest member's time as
    one of a group of its size, with its threads (the named machine's slot threads, or the
    fewest of any machine's, when unset) and devices. A member of a kind with no measurement
    is taken to last ``guess`` seconds, in a group as alone (``measured`` False)."""
    by_name = {m.name: m for m in machines}
    default_threads = min((m.slot_threads for m in machines), default=1)
    unmeasured = guess
    signature = {
        p.trial: (p.kind, p.structure, json.dumps(p.features, sort_keys=True, default=str)) for p in pending.values()
    }
    members: dict[tuple[tuple[str, str, str], int, int, int], Estimate] = {}  # one member's, by what it depends on
    cache: dict[Launch, Estimate] = {}

    def member(trial: int, group: int, threads: int, devices: int) -> Estimate:
        key = (signature[trial], group, threads, devices)
        if key not in members:
            p = pending[trial]
            guess = cost.estimate(p.kind, p.structure, p.features, group=group, threads=threads, devices=devices)
            members[key] = Estimate(seconds=unmeasured * group, measured=False) if guess is None else guess
        return members[key]

    def estimate(launch: Launch) -> Estimate:
        if launch not in cache:
            machine = by_name.get(launch.machine) if launch.machine is not None else None
            threads = launch.threads or (machine.slot_threads if machine is not None else default_threads)
            size = len(launch.trials)
            guesses = [member(t, size, threads, launch.devices) for t in launch.trials]
            cache[launch] = max(guesses, key=lambda guess: (not guess.measured, guess.seconds))
        return cache[launch]

    return estimate


def _devices(job: Job) -> int:
    return 1 if job.gpus else 0


def fcfs(
    pending: Sequence[Pending], jobs: Mapping[int, Job], cost: CostModel, estimate: Callable[[Launch], Estimate]
) -> Plan:
    """Today's rule: one trial per slot, in the order they came."""
    return tuple(Launch((p.trial,), devices=_devices(jobs[p.job])) for p in pending)


def shortest_first(
    pending: Sequence[Pending], jobs: Mapping[int, Job], cost: CostModel, estimate: Callable[[Launch], Estimate]
) -> Plan:
    """One trial per slot, the shortest expected first."""
    return tuple(sorted(fcfs(pending, jobs, cost, estimate), key=lambda launch: estimate(launch).seconds))


def largest_first(
    pending: Sequence[Pending], jobs: Mapping[int, Job], cost: CostModel, estimate: Callable[[Launch], Estimate]
) -> Plan:
    """Trials of one job and structure fused in groups of their profile's best size (within the
    job's limit), the longest units first."""
    groups: dict[tuple[int, str], list[Pending]] = {}
    for p in pending:
        groups.setdefault((p.job, p.structure), []).append(p)
    launches = []
    for (job_id, structure), members in groups.items():
        job = jobs[job_id]
        size = cost.best_group(members[0].kind, structure, job.max_group)
        for at in range(0, len(members), size):
            chunk = tuple(p.trial for p in members[at : at + size])
            launches.append(Launch(chunk, devices=_devices(job)))
    return tuple(sorted(launches, key=lambda launch: -estimate(launch).seconds))


#: The greedy plans a search starts from, and that a setting can choose instead of it.
BASELINES: Mapping[str, Callable[..., Plan]] = {
    "fcfs": fcfs,
    "largest_first": largest_first,
    "shortest_first": shortest_first,
}
#: What the planner setting may name.
METHODS = ("search", *BASELINES)


def choose_plan(
    pending: Sequence[Pending],
    *,
    machines: Sequence[Machine],
    jobs: Mapping[int, Job],
    cost: CostModel,
    method: str = "search",
    budget_s: float = 0.05,
    max_steps: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> Choice:
    """The plan for ``pending`` (oldest first): a baseline's, or the search's within ``budget_s``
    seconds (and ``max_steps`` plans weighed, where given)."""
    if method not in METHODS:
        raise ValueError(f"unknown placement method {method!r}: one of {', '.join(METHODS)}")
    by_trial = {p.trial: p for p in pending}
    estimate = estimator(cost, by_trial, machines)
    unknown = tuple(sorted({p.kind for p in pending if not cost.knows(p.kind)}))
    known = [p for p in pending if cost.knows(p.kind)]
    if not known:
        plan = fcfs(pending, jobs, cost, estimate)
        return Choice(plan, method, Placement.FCFS, 0, None, fallback=f"no trial of {', '.join(unknown)} measured yet")
    if unknown:  # their trials are taken to last as long as the median of the others'
        typical = statistics.median(estimate(Launch((p.trial,), devices=_devices(jobs[p.job]))).seconds for p in known)
        estimate = estimator(cost, by_trial, machines, guess=typical)

    def play(plan: Plan) -> Outcome:
        return simulate(plan, machines=machines, jobs=jobs, pending=by_trial, estimate=estimate)

    if method != Placement.SEARCH:
        plan = BASELINES[method](pending, jobs, cost, estimate)
        return Choice(plan, method, method, 1, play(plan), guessed=unknown)
    played = {
        name: (plan, play(plan)) for name, make in BASELINES.items() for plan in [make(pending, jobs, cost, estimate)]
    }
    fair = played[Placement.FCFS][1]
    horizon = 2 * fair.makespan + 1.0

    def energy(plan: Plan, outcome: Outcome) -> float:
        if not outcome.feasible:
            return math.inf
        late = sum(
            max(0.0, end - FAIR_SLACK * fair.job_finish.get(job, end)) for job, end in outcome.job_finish.items()
        )
        fused = sum(len(launch.trials) - 1 for launch in plan)
        return (
            outcome.makespan
            + outcome.completion
            + horizon * (outcome.unfinished + FUSED_TIE * fused)
            + FAIR_WEIGHT * late
        )

    weighed = [(energy(plan, outcome), name, plan, outcome) for name, (plan, outcome) in played.items()]
    best_energy, start, best, best_outcome = min(weighed, key=lambda row: row[0])
    current, current_energy = best, best_energy
    rng = random.Random(seed)
    began, steps = clock(), len(weighed)
    t0 = 0.05 * best_energy if math.isfinite(best_energy) else 1.0
    while len(current) > 0:
        progress = (clock() - began) / budget_s if budget_s > 0 else 1.0
        if max_steps is not None:
            progress = max(progress, steps / max_steps)
        if progress >= 1.0:
            break
        proposal = _move(current, rng, by_trial, jobs, machines)
        if proposal is None:
            steps += 1
            continue
        outcome = play(proposal)
        steps += 1
        e = energy(proposal, outcome)
        temperature = t0 * (1.0 - progress)
        if e <= current_energy or (
            temperature > 0 and math.isfinite(e) and rng.random() < math.exp((current_energy - e) / temperature)
        ):
            current, current_energy = proposal, e
            if e < best_energy:
                best, best_energy, best_outcome = proposal, e, outcome
    return Choice(best, method, start, steps, best_outcome, guessed=unknown)


def _move(
    plan: Plan, rng: random.Random, pending: Mapping[int, Pending], jobs: Mapping[int, Job], machines: Sequence[Machine]
) -> Plan | None:
    """One random change of ``plan``, or None where the drawn change does not apply."""
    launches = list(plan)
    i = rng.randrange(len(launches))
    launch = launches[i]
    first = pending[launch.trials[0]]
    job = jobs[first.job]
    kind = rng.choice(("swap", "machine", "threads", "merge", "split", "devices"))
    if kind == "swap":
        j = rng.randrange(len(launches))
        launches[i], launches[j] = launches[j], launches[i]
    elif kind == "machine":
        names = [None, *(m.name for m in machines)]
        launches[i] = Launch(launch.trials, rng.choice(names), launch.threads, launch.devices)
    elif kind == "threads":
        most = max(m.cores for m in machines)
        options = [None, *(2**k for k in range(int(math.log2(most)) + 1))]
        launches[i] = Launch(launch.trials, launch.machine, rng.choice(options), launch.devices)
    elif kind == "merge":
        mates = [
            j
            for j, other in enumerate(launches)
            if j != i
            and pending[other.trials[0]].job == first.job
            and pending[other.trials[0]].structure == first.structure
            and len(other.trials) + len(launch.trials) <= job.max_group
        ]
        if not mates:
            return None
        j = rng.choice(mates)
        at, gone = min(i, j), max(i, j)
        launches[at] = Launch(launch.trials + launches[j].trials, launch.machine, launch.threads, launch.devices)
        del launches[gone]
    elif kind == "split":
        if len(launch.trials) < 2:
            return None
        cut = rng.randrange(1, len(launch.trials))
        launches[i] = Launch(launch.trials[:cut], launch.machine, launch.threads, launch.devices)
        launches.insert(i + 1, Launch(launch.trials[cut:], launch.machine, launch.threads, launch.devices))
    else:
        most = min(pending[t].max_devices for t in launch.trials)
        if not job.gpus or most <= 1:
            return None
        options = [d for d in (1, 2, 4) if d <= min(most, job.gpus)]
        launches[i] = Launch(launch.trials, launch.machine, launch.threads, rng.choice(options))
    return tuple(launches)
