"""The execution simulator: a plan played forward on the cost model's durations.

Discrete events over machines, their cores and their GPUs. At each event the launches not
yet started are taken in the plan's order, and each starts if its machine has the threads,
devices and memory for it and its job is below its cap (its fair share) and its GPU count.
A job's launches start in the plan's order; another job's launch may pass one that does
not fit, as a free slot takes the next trial that fits it. A launch ends after its estimated time, scaled by the
largest share of training its members are expected to run (early stopping), or at its
job's deadline, where the driver stops what runs: its trials then count as unfinished.

Pure and fast (an event costs a heap operation per job with work waiting): the search calls
it for every plan it weighs.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from baobab.advisor.placement._work import Estimate, Job, Launch, Machine, Pending, Plan

__all__ = ["Outcome", "simulate"]


@dataclass(frozen=True)
class Outcome:
    """What a plan is expected to do.

    ``makespan``: seconds until its last launch ends; ``utilisation``: busy core-seconds over
    the machines' core-seconds in that time; ``finished``: trials expected to end before
    their job's deadline; ``unfinished``: those that would not (cut at the deadline, or never
    started); ``job_finish``: when each job's last launch ends; ``starts``: each launch's start
    (None: never); ``completion``: the mean time at which its started trials end (a fused
    trial's at its launch's end); ``feasible``: False when a launch fits no machine at all (too
    much memory, more threads or devices than any has), and the plan must not be used.
    """

    makespan: float
    utilisation: float
    finished: int
    unfinished: int
    job_finish: Mapping[int, float]
    starts: tuple[float | None, ...]
    completion: float = 0.0
    feasible: bool = True


@dataclass
class _Room:
    cores: int
    memory: float
    gpus: list[float]  # free memory of each device


def simulate(
    plan: Plan,
    *,
    machines: Sequence[Machine],
    jobs: Mapping[int, Job],
    pending: Mapping[int, Pending],
    estimate: Callable[[Launch], Estimate],
) -> Outcome:
    """Plays ``plan`` forward from time 0. ``estimate`` gives a launch's time and memory."""
    by_name = {machine.name: machine for machine in machines}
    rooms = {m.name: _Room(m.cores, m.memory, [m.memory] * m.gpus) for m in machines}
    units: dict[int, int] = dict.fromkeys(jobs, 0)
    devices_held: dict[int, Counter[tuple[str, int]]] = {job: Counter() for job in jobs}  # units on each device
    costs = [estimate(launch) for launch in plan]
    job_of = [pending[launch.trials[0]].job for launch in plan]
    starts: list[float | None] = [None] * len(plan)
    queues: dict[int, deque[int]] = {job: deque() for job in jobs}  # each job's launches not yet started
    for i, job_id in enumerate(job_of):
        queues[job_id].append(i)
    running: list[tuple[float, int, str, int, list[int]]] = []  # end, launch, machine, threads, devices used
    job_finish: dict[int, float] = {}
    finished = unfinished = 0
    busy = ended = 0.0  # core-seconds, and the sum of the started trials' end times
    now = 0.0
    free_cores = sum(m.cores for m in machines)

    for i, launch in enumerate(plan):
        if not any(_could_ever_fit(launch, costs[i], m) for m in _candidates(launch, by_name, machines)):
            return Outcome(math.inf, 0.0, 0, len(pending), {}, tuple(starts), feasible=False)

    while True:
        # the next launch of each job below its cap, earliest in the plan first
        heads = [(queue[0], job_id) for job_id, queue in queues.items() if queue and units[job_id] < jobs[job_id].cap]
        heapq.heapify(heads)
        while heads and free_cores > 0:
            i, job_id = heapq.heappop(heads)
            job, queue, launch = jobs[job_id], queues[job_id], plan[i]
            if now >= job.deadline:  # the job starts no more trials
                unfinished += sum(len(plan[k].trials) for k in queue)
                queue.clear()
                continue
            held = devices_held[job_id]
            placed = _place(launch, costs[i], _candidates(launch, by_name, machines), rooms, held, job.gpus)
            if placed is None:
                continue  # it waits for room; other jobs' launches may pass it
            queue.popleft()
            name, threads, gpus = placed
            share = max(pending[t].fraction for t in launch.trials)
            end = now + costs[i].seconds * share
            if end > job.deadline:
                end = job.deadline
                unfinished += len(launch.trials)
            else:
                finished += len(launch.trials)
            starts[i] = now
            free_cores -= threads
            units[job_id] += 1
            held.update((name, g) for g in gpus)
            busy += threads * (end - now)
            ended += end * len(launch.trials)
            job_finish[job_id] = max(job_finish.get(job_id, 0.0), end)
            heapq.heappush(running, (end, i, name, threads, gpus))
            if queue and units[job_id] < job.cap:
                heapq.heappush(heads, (queue[0], job_id))
        if not running:
            break  # what waits can never start (a cap of 0, a job with no devices)
        end, i, name, threads, gpus = heapq.heappop(running)
        now = end
        room, cost = rooms[name], costs[i]
        room.cores += threads
        free_cores += threads
        if gpus:
            for g in gpus:
                room.gpus[g] += cost.memory
        else:
            room.memory += cost.memory
        units[job_of[i]] -= 1
        devices_held[job_of[i]].subtract((name, g) for g in gpus)
        devices_held[job_of[i]] += Counter()  # drops the devices it no longer uses
    unfinished += sum(len(plan[i].trials) for queue in queues.values() for i in queue)
    total_cores = sum(m.cores for m in machines)
    started = sum(len(plan[i].trials) for i, start in enumerate(starts) if start is not None)
    return Outcome(
        makespan=now,
        utilisation=busy / (total_cores * now) if now > 0 and total_cores else 0.0,
        finished=finished,
        unfinished=unfinished,
        job_finish=job_finish,
        starts=tuple(starts),
        completion=ended / started if started else 0.0,
    )


def _candidates(launch: Launch, by_name: Mapping[str, Machine], machines: Sequence[Machine]) -> Sequence[Machine]:
    if launch.machine is None:
        return machines
    machine = by_name.get(launch.machine)
    return () if machine is None else (machine,)


def _threads(launch: Launch, machine: Machine) -> int:
    return machine.slot_threads if launch.threads is None else launch.threads


def _could_ever_fit(launch: Launch, cost: Estimate, machine: Machine) -> bool:
    if _threads(launch, machine) > machine.cores or launch.devices > machine.gpus:
        return False
    return cost.memory <= machine.memory


def _place(
    launch: Launch,
    cost: Estimate,
    candidates: Sequence[Machine],
    rooms: Mapping[str, _Room],
    held: Counter[tuple[str, int]],
    gpu_count: int,
) -> tuple[str, int, list[int]] | None:
    """Takes room for the launch on the first candidate that has it: its threads, and its memory on
    the host or on each of ``devices`` GPUs. Its job's GPU_COUNT (``gpu_count``) bounds the devices
    the job holds at once, not its units: units of a job share a device where memory allows, so
    the GPUs it already holds come first, then those with the most free memory."""
    for machine in candidates:
        room, threads = rooms[machine.name], _threads(launch, machine)
        if threads > room.cores:
            continue
        if launch.devices:
            fitting = [g for g in range(len(room.gpus)) if room.gpus[g] >= cost.memory]
            fitting.sort(key=lambda g: ((machine.name, g) not in held, -room.gpus[g]))
            order = fitting[: launch.devices]
            new = sum((machine.name, g) not in held for g in order)
            if len(order) < launch.devices or len(held) + new > gpu_count:
                continue
            for g in order:
                room.gpus[g] -= cost.memory
            room.cores -= threads
            return machine.name, threads, order
        if cost.memory > room.memory:
            continue
        room.memory -= cost.memory
        room.cores -= threads
        return machine.name, threads, []
    return None
