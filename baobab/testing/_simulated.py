"""A simulated cluster for the real job driver: as many slots as asked, trials that last virtual time.

A cluster of a thousand workers cannot run here, yet what breaks at that size is the
driver's side: proposals, scheduling, stopping rules and the store. So the real
:class:`~baobab.advisor.JobDriver`, with its real strategies, stopping rules and store,
runs against :class:`SimulatedCluster`, an executor (the seam the driver already has)
whose trials take time on a :class:`VirtualClock` instead of running anything. The
simulated workers write the store exactly as workers do (``claim_trial``,
interim metrics, ``finish_trial``, ``end_trial`` for a cancellation) and publish
``TRIAL_FINISHED``; the driver is given the same clock, so its deadlines, grace periods
and timers fire in virtual time.

:func:`run_simulation` is the driver's own loop (fill slots, then handle what happened)
with the clock jumped to the next thing due instead of waited for, and it measures
what does not depend on the machine (slot utilisation in virtual time, every trial
accounted once) beside what does (the driver's CPU time), kept apart from the simulated
workers' own writes, which a real cluster spreads over its machines.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, insert

from baobab.model import DatasetFormat, Task, knob_config_to_json
from baobab.store import (
    ClaimRefused,
    Dataset,
    Event,
    EventChannel,
    EventKind,
    InterimMetric,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    TrialState,
    User,
    UserRole,
    claim_trial,
    end_trial,
    finish_trial,
    session_scope,
)
from baobab.testing._synthetic import branin_knob_config, branin_score

__all__ = ["SimulatedCluster", "SimulatedWork", "Simulation", "VirtualClock", "add_simulated_jobs", "run_simulation"]


class VirtualClock:
    """Epoch seconds that move only when told: the driver's ``clock`` and the simulated workers' time."""

    def __init__(self, start: float = 1.8e9) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, to: float) -> None:
        """Move to ``to``; a time already past leaves the clock where it is (time never runs back)."""
        self._now = max(self._now, float(to))


@dataclass(frozen=True)
class SimulatedWork:
    """What a simulated trial does: how long it runs, what it reports, what it scores.

    Durations are log-normal around ``median_s`` (``spread`` is the sigma of their logarithm)
    and scores :func:`~baobab.testing.branin_score` of the knobs plus Gaussian ``noise``; both
    are drawn from a generator seeded by the trial id, so a run is the same every time. A trial
    reports ``steps`` interim metrics (``score``) evenly over its run, rising to its final score;
    one asked to stop ends at its next report, scored by it.
    """

    median_s: float = 60.0
    spread: float = 0.5
    noise: float = 0.1
    steps: int = 0
    score: Callable[[Mapping[str, Any]], float] = branin_score

    def draw(self, trial_id: int, knobs: Mapping[str, Any]) -> tuple[float, float]:
        """(duration in seconds, final score) of trial ``trial_id``."""
        rng = np.random.default_rng(trial_id)
        duration = self.median_s * math.exp(self.spread * float(rng.standard_normal()))
        return duration, self.score(knobs) + self.noise * float(rng.standard_normal())

    def interim(self, final: float, step: int) -> float:
        """The score reported at ``step`` (1 to ``steps``): worse by one unit per step still to go."""
        return final - (self.steps - step)


@dataclass
class _Run:
    """A trial on a slot: its claim, when it ends, and what it scores."""

    trial_id: int
    attempt: int
    started: float
    duration: float
    score: float
    unit: int
    step: int = 0
    stop_reason: str | None = None


@dataclass
class Simulation:
    """What a simulated run measured.

    ``busy_s`` are slot-seconds of virtual time that trials held a slot; ``span_s`` the virtual
    time from the first trial's start to the last one's end; ``driver_cpu_s`` the CPU time of the
    driver's own thread in ``step`` and ``handle`` (the workers' writes excluded), ``driver_wall_s``
    their wall time (with the store's round trips).
    """

    slots: int
    outcomes: Counter[TrialState] = field(default_factory=Counter)
    ended: Counter[int] = field(default_factory=Counter)
    busy_s: float = 0.0
    first_start: float | None = None
    last_start: float | None = None
    last_end: float | None = None
    #: ``busy_s`` when the last unit of work started: after it, slots idle only because nothing is left.
    busy_at_last_start: float = 0.0
    driver_cpu_s: float = 0.0
    driver_wall_s: float = 0.0
    driver_calls: int = 0
    loops: int = 0
    wall_s: float = 0.0
    _changed: float | None = None

    @property
    def trials(self) -> int:
        return sum(self.outcomes.values())

    @property
    def span_s(self) -> float:
        if self.first_start is None or self.last_end is None:
            return 0.0
        return self.last_end - self.first_start

    @property
    def utilisation(self) -> float:
        """Busy slot-seconds over every slot's virtual time from the first start to the last end.

        It counts the drain at the end (the last trials finishing while nothing is left to start),
        which depends on the workload's spread of durations and no scheduler can avoid."""
        return self.busy_s / (self.slots * self.span_s) if self.span_s > 0 else 0.0

    @property
    def utilisation_while_waiting(self) -> float:
        """The same from the first start to the last: the share of slot time busy while there was work to start."""
        if self.first_start is None or self.last_start is None or self.last_start <= self.first_start:
            return 0.0
        return self.busy_at_last_start / (self.slots * (self.last_start - self.first_start))

    def account(self, busy: int, at: float) -> None:
        """Add the slot-seconds ``busy`` slots held since the last change, which happens at ``at``."""
        if self._changed is not None:
            self.busy_s += busy * max(0.0, at - self._changed)
        self._changed = at if self._changed is None else max(at, self._changed)


class SimulatedCluster:
    """An executor whose ``slots`` workers run nothing, each trial taking its virtual time (see the module).

    Units of work wait in submission order for a free slot; a fused group takes one slot and
    ends when its longest member does. The store is written as a worker writes it, at the
    clock's time, and ``TRIAL_FINISHED`` published after each final write.
    """

    queue_ahead = 0

    def __init__(
        self,
        engine: Engine,
        events: EventChannel,
        clock: VirtualClock,
        *,
        slots: int,
        work: SimulatedWork | None = None,
        worker: str = "simulated",
    ) -> None:
        if slots < 1:
            raise ValueError(f"a simulated cluster needs slots >= 1, got {slots}")
        self.engine = engine
        self.events = events
        self.clock = clock
        self.work = work or SimulatedWork()
        self.worker = worker
        self.report = Simulation(slots)
        self._slots = slots
        self._waiting: deque[tuple[int, tuple[int, ...]]] = deque()
        self._units = itertools.count()
        self._runs: dict[int, _Run] = {}
        self._unit_runs: dict[int, set[int]] = {}
        self._stops: dict[int, str] = {}
        self._due: list[tuple[float, int, int]] = []  # (time, order, trial id): its next report or its end
        self._order = itertools.count()
        self._active: set[int] = set()

    # -- the Executor protocol -----------------------------------------------------------------

    @property
    def slots(self) -> int:
        return self._slots

    def submit(self, trials: int | Sequence[int]) -> None:
        ids = (trials,) if isinstance(trials, int) else tuple(trials)
        ids = tuple(i for i in ids if i not in self._active)
        if ids:
            self._active.update(ids)
            self._waiting.append((next(self._units), ids))

    def request_stop(self, trial_id: int, reason: str) -> None:
        run = self._runs.get(trial_id)
        if run is not None:
            run.stop_reason = reason
            if not self.work.steps:  # nothing to stop at: it ends now
                self._push(self.clock(), trial_id)
        elif trial_id in self._active:
            self._stops[trial_id] = reason

    def cancel(self, trial_id: int, reason: str) -> None:
        if trial_id not in self._active:
            return
        self._waiting = deque(
            (unit, rest) for unit, ids in self._waiting if (rest := tuple(i for i in ids if i != trial_id))
        )
        now = self.clock()
        with session_scope(self.engine) as session:
            end_trial(session, trial_id, TrialState.CANCELLED, now=_utc(now), error=reason)
        self._release(trial_id, TrialState.CANCELLED, now)

    def active(self) -> set[int]:
        return set(self._active)

    def close(self) -> None:
        self._waiting.clear()
        self._runs.clear()
        self._active.clear()

    # -- the simulated workers -----------------------------------------------------------------

    @property
    def busy(self) -> int:
        """Slots holding a unit of work."""
        return len(self._unit_runs)

    def next_due(self) -> float:
        """Virtual time of the next report or end; infinity when nothing runs."""
        while self._due and self._due[0][2] not in self._runs:
            heapq.heappop(self._due)  # its trial was cancelled meanwhile
        return self._due[0][0] if self._due else math.inf

    def start_waiting(self) -> None:
        """Put waiting units on free slots: each member claims its row, as a worker does."""
        now = self.clock()
        while self._waiting and self.busy < self._slots:
            unit, ids = self._waiting.popleft()
            members = set()
            for trial_id in ids:
                claim = claim_trial(self.engine, trial_id, self.worker, now=_utc(now))
                if isinstance(claim, ClaimRefused):
                    self._active.discard(trial_id)  # cancelled or ended meanwhile: its writer published it
                    continue
                duration, score = self.work.draw(trial_id, claim.knobs)
                run = _Run(trial_id, claim.attempt, now, duration, score, unit)
                run.stop_reason = self._stops.pop(trial_id, None)
                self._runs[trial_id] = run
                members.add(trial_id)
                stops_now = run.stop_reason is not None and not self.work.steps
                self._push(now if stops_now else self._next_time(run), trial_id)
            if members:
                self.report.account(self.busy, now)
                self._unit_runs[unit] = members
                if self.report.first_start is None:
                    self.report.first_start = now
                self.report.last_start = now
                self.report.busy_at_last_start = self.report.busy_s

    def fire_due(self) -> None:
        """Do what fell due by the clock's time, each at its own time: interim reports, and the ends they or
        the durations bring (a slot frees when its trial ends, however late the driver hears of it)."""
        now = self.clock()
        reports: list[dict[str, Any]] = []  # written at once: what is due together is read together
        while (at := self.next_due()) <= now:
            _, _, trial_id = heapq.heappop(self._due)
            run = self._runs[trial_id]
            if self.work.steps and run.step < self.work.steps:
                run.step += 1
                value = self.work.interim(run.score, run.step)
                reports.append({"trial_id": trial_id, "step": run.step, "metrics": {"score": value}, "time": _utc(at)})
                if run.stop_reason is not None:
                    self._finish(run, TrialState.STOPPED, value, at)
                elif run.step < self.work.steps:
                    self._push(self._next_time(run), trial_id)
                else:
                    self._finish(run, TrialState.COMPLETED, run.score, at)
            else:
                state = TrialState.COMPLETED if run.stop_reason is None else TrialState.STOPPED
                self._finish(run, state, run.score, at)
        if reports:
            with session_scope(self.engine) as session:
                session.execute(insert(InterimMetric), reports)

    def _next_time(self, run: _Run) -> float:
        parts = max(1, self.work.steps)
        return run.started + run.duration * (run.step + 1) / parts

    def _push(self, at: float, trial_id: int) -> None:
        heapq.heappush(self._due, (at, next(self._order), trial_id))

    def _finish(self, run: _Run, state: TrialState, score: float, at: float) -> None:
        stored = finish_trial(self.engine, run.trial_id, run.attempt, state, now=_utc(at), score=score)
        self._release(run.trial_id, stored or state, at)

    def _release(self, trial_id: int, state: TrialState, at: float) -> None:
        """The trial left its slot at ``at`` (a unit's slot frees with its last member); publish its end."""
        self._active.discard(trial_id)
        run = self._runs.pop(trial_id, None)
        if run is not None:
            members = self._unit_runs[run.unit]
            members.discard(trial_id)
            if not members:
                self.report.account(self.busy, at)
                del self._unit_runs[run.unit]
            self.report.last_end = at
        self.report.outcomes[state] += 1
        self.report.ended[trial_id] += 1
        self.events.publish(Event(EventKind.TRIAL_FINISHED, trial_id))


def run_simulation(
    driver: Any,
    cluster: SimulatedCluster,
    *,
    until: Callable[[], bool] | None = None,
    max_virtual_s: float = math.inf,
    on_loop: Callable[[Simulation], None] | None = None,
    charge: bool = False,
) -> Simulation:
    """Run ``driver`` (a :class:`~baobab.advisor.JobDriver` on ``cluster.clock``) until it runs no job.

    The loop is the driver's own (:meth:`~baobab.advisor.JobDriver.run`): fire timers and fill
    slots, then handle every event; only instead of waiting for the next event it moves the
    clock to the next thing due, a trial's report or end or the driver's own next timer.

    Args:
        driver: one driver, or several that share the jobs (each with ``lease_s`` and a name of its
            own). Several take their turns one after another, each seeing every event.
        until: stop as soon as this says so (default: once no driver runs a job and no trial runs,
            after one took up at least one).
        max_virtual_s: stop after this much virtual time.
        on_loop: called with the report after each turn (for progress, or sampling memory).
        charge: move the clock on by the wall time of each driver call too, as if the cluster
            waited for the driver: slots its slowness leaves idle then show in the utilisation
            (which then depends on the machine; without it, the driver decides in no time).
            Several drivers are charged the slowest one's time of each turn, as if each ran on a
            machine of its own (the store they share sees their calls one at a time).
    """
    drivers = list(driver) if isinstance(driver, Sequence) else [driver]
    report = cluster.report
    clock = cluster.clock
    charged = clock if charge else None
    subscription = cluster.events.subscribe(
        EventKind.JOB_CREATED, EventKind.JOB_STOPPED, EventKind.TRIAL_FINISHED, EventKind.TRIAL_STOP_REQUESTED
    )
    started, wall = clock(), time.perf_counter()
    seen_jobs = False
    try:
        while clock() - started < max_virtual_s:
            _timed(report, charged, [(d.step, ()) for d in drivers])
            cluster.fire_due()  # what fell due while the driver worked (charged time only)
            cluster.start_waiting()
            running = any(d.jobs for d in drivers)
            seen_jobs = seen_jobs or running
            done = until() if until is not None else seen_jobs and not running and not cluster.active()
            if done:
                break
            clock.advance(min(cluster.next_due(), clock() + min(d.wait_s() for d in drivers)))
            cluster.fire_due()
            batch = []
            while (event := subscription.get(timeout=0)) is not None:
                batch.append(event)
            if batch:
                _timed(report, charged, [(d.handle_all, (batch,)) for d in drivers])
            report.loops += 1
            if on_loop is not None:
                on_loop(report)
    finally:
        subscription.close()
        report.wall_s += time.perf_counter() - wall
    return report


def _timed(
    report: Simulation, clock: VirtualClock | None, calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]
) -> None:
    """Call the drivers, adding their CPU and wall time to the report (and the slowest one's wall time to
    ``clock`` when given: drivers on machines of their own)."""
    slowest = 0.0
    try:
        for fn, args in calls:
            begin, wall = time.thread_time(), time.perf_counter()
            try:
                fn(*args)
            finally:
                elapsed = time.perf_counter() - wall
                slowest = max(slowest, elapsed)
                report.driver_cpu_s += time.thread_time() - begin
                report.driver_wall_s += elapsed
                report.driver_calls += 1
    finally:
        if clock is not None:
            clock.advance(clock() + slowest)


def add_simulated_jobs(
    engine: Engine,
    events: EventChannel | None,
    *,
    jobs: int,
    trials: int,
    gpus: int,
    strategies: Sequence[str] = ("random",),
    options: Mapping[str, Any] | None = None,
    time_hours: float | None = None,
) -> list[int]:
    """``jobs`` train jobs on the Branin knobs (one sub-job each, strategies taken in turn), as the API writes them.

    Each asks for ``trials`` trials on ``gpus`` slots at once, with the job ``options`` given
    (fusion is off unless they say otherwise: a simulated trial measures no fusion profile).
    """
    job_options = {"fusion": "off", **(options or {})}
    budget: dict[str, Any] = {"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": gpus}
    if time_hours is not None:
        budget["TIME_HOURS"] = time_hours
    knob_config = knob_config_to_json(branin_knob_config())
    with session_scope(engine) as session:
        owner = User(email=f"sim-{time.time_ns()}@example.com", password_hash="x", role=UserRole.APP_DEVELOPER)
        dataset = Dataset(
            owner=owner, name="simulated", format=DatasetFormat.TABULAR, artifact_path="d", size_bytes=1, checksum="0"
        )
        template = ModelTemplate(
            owner=owner,
            name="branin",
            task=Task.TABULAR_REGRESSION,
            class_name="Branin",
            artifact_path="t",
            checksum="0",
            access=ModelAccess.PRIVATE,
            knob_config=knob_config,
        )
        rows = []
        for n in range(jobs):
            job = TrainJob(
                owner=owner,
                app=f"sim{n}",
                app_version=1,
                task=Task.TABULAR_REGRESSION,
                train_dataset=dataset,
                val_dataset=dataset,
                budget=budget,
                options=job_options,
            )
            job.sub_jobs.append(SubJob(model_template=template, strategy=strategies[n % len(strategies)], seed=n))
            rows.append(job)
        session.add_all(rows)
        session.flush()
        ids = [job.id for job in rows]
    if events is not None:
        for job_id in ids:
            events.publish(Event(EventKind.JOB_CREATED, job_id))
    return ids


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
