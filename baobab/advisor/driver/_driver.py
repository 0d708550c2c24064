"""The job driver: takes up train jobs, turns proposals into trials, and owns the budgets.

One thread (``JobDriver.run``) does all of it. It wakes on events (JOB_CREATED,
JOB_STOPPED, TRIAL_FINISHED), on its own timers (a job's deadline, the end of a grace
period) and on a slow rescan of the store that catches anything an event missed; it
never polls in between (it only looks at its stop flag every ``stop_check_s``).

The store is the truth and memory a cache of it. Each job the driver runs is a
:class:`~baobab.advisor._scheduling.JobState`, built once from the job's rows when the
job is taken up (or found again after a restart) and then kept in step trial by trial:
a finished trial costs a read of its row (the rows of a batch of events in one query), a
new trial a row in the one insert of its scheduling pass (committed before any of them
is submitted). So every decision is made from memory, and any restart rebuilds the
same memory from the rows:

- a trial PENDING or RUNNING in the store that the executor does not hold was lost
  (the platform stopped while it ran): it is submitted again, same row and knobs,
  unless it was already tried ``max_attempts`` times (then ERRORED);
- strategies are rebuilt from the finished trials; proposals are seeded by
  ``(sub-job seed, trial number)``, so numbers not used yet get the proposals they
  would have got;
- deadlines come from the persisted ``started_at``.

Budgets (see :class:`~baobab.advisor.Budget`): MODEL_TRIAL_COUNT trial rows per
sub-job; GPU_COUNT trials of a job at once (0: ``settings.cpu_slots``), all jobs
together within ``executor.slots``, free slots going to the job with the fewest running
trials; TIME_HOURS from the job's start: no trial starts once one would not end in time
(at the median duration of the job's finished trials), running ones are asked to stop
at the deadline and cancelled ``grace_s`` later. A user's stop does the same at once.

Several drivers may run (one per ``baobab advisor``): with ``lease_s`` set, a driver takes
up only jobs no other driver holds (``train_jobs.driver``, ``lease_expires_at``), renews
its leases every third of ``lease_s``, and drops a job whose lease another driver took
after it lapsed. A driver killed without a word loses its jobs to the others within
``lease_s``; one that stops cleanly hands them over at once.

The package: :mod:`._driver` (this thread), :mod:`._sync` (rescans, taking up jobs,
leases), :mod:`._replay` (a job rebuilt from its rows), :mod:`._core` (finishing trials,
stopping and ending jobs), :mod:`._metrics` (the early-stopping feed), :mod:`._reads` and
:mod:`._rows` (every read and every write of the store), :mod:`._telemetry` (its Prometheus metrics).

An error while handling one job ends that job ERRORED (its ``error`` says why) and the
driver goes on; a store error instead drops the job from memory, to be taken up again
by the next rescan (after ``_STORE_RETRIES`` such errors in a row, the job ends ERRORED).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Row

from baobab.advisor._base import Strategy
from baobab.advisor._factory import choose_strategy, make_strategy
from baobab.advisor._job_options import FusionMode
from baobab.advisor._plans import PlanStep, servable
from baobab.advisor._scheduling import ActiveTrial, JobState, StopCause, SubJobState, pick_next
from baobab.advisor._trial_knobs import trial_knobs, trial_policies
from baobab.advisor.driver import _rows, _telemetry
from baobab.advisor.driver._reads import job_status, trial_rows
from baobab.advisor.driver._sync import StoreSync
from baobab.advisor.placement import Decision
from baobab.model import Policy, is_structural, knobs_to_json, structure_key
from baobab.store import Event, EventKind, JobStatus, TrialState

__all__ = ["JobDriver"]

logger = logging.getLogger(__name__)

#: Events handled before the driver looks at its timers and free slots again.
_EVENT_BATCH = 256
#: Seconds between two predictions of the placement planner stored for a job (a new fallback is stored at once).
PLACEMENT_RECORD_S = 5.0


class JobDriver(StoreSync):
    """Runs every train job of the store on an executor, within the jobs' budgets.

    Args:
        engine: the metadata store.
        executor: runs trials (see :class:`~baobab.advisor.Executor`); the driver never closes it.
        events: the channel the admin API and the executor publish on.
        settings: ``cpu_slots`` is the concurrency of a GPU_COUNT=0 job; ``placement`` says whether
            the fixed rules or the placement planner decide whose trials take a free slot.
        grace_s: how long trials asked to stop (deadline, user stop) may run before they are cancelled.
        max_errors: a sub-job whose first ``max_errors`` trials all errored starts no more.
        max_attempts: a trial lost this many times (counted by ``Trial.attempts``) is not run again.
        rescan_s: how often the store is read again in case an event was lost.
        stop_check_s: the longest the thread waits before it looks at its stop flag.
        lease_s: hold jobs by a lease of this many seconds, so that several drivers can
            share a store; None (one driver per store): no leases.
        metrics_s: how often the interim metrics of trials watched by an early-stopping rule
            are read (local workers write them to the store without an event; cluster
            workers' ``TRIAL_METRICS`` events make the driver read at once).
        name: how this driver appears in ``train_jobs.driver``; ``<host>:<pid>:<random>`` by default.
        clock: epoch seconds now (``time.time``); a simulated cluster runs the driver on a virtual clock
            (:class:`baobab.testing.SimulatedCluster`), so that deadlines and timers fire in its time.
    """

    # -- the thread ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """The thread body: runs jobs until ``stop`` is set. Errors are logged, never raised."""
        subscription = self.events.subscribe(
            EventKind.JOB_CREATED,
            EventKind.JOB_STOPPED,
            EventKind.TRIAL_FINISHED,
            EventKind.TRIAL_METRICS,
            EventKind.TRIAL_STOP_REQUESTED,
        )
        self._next_rescan = 0.0  # subscribed first, then the store is read: nothing falls in between
        try:
            while not stop.is_set():
                self.step()
                event = subscription.get(timeout=self.wait_s())
                batch = []
                while event is not None:
                    batch.append(event)
                    if len(batch) >= _EVENT_BATCH or stop.is_set():
                        break
                    event = subscription.get(timeout=0)
                self.handle_all(batch)
        finally:
            subscription.close()
            self._safely(self.release_leases)

    def step(self, now: float | None = None) -> None:
        """Fire what is due (rescan, deadlines, grace ends) and fill free slots."""
        self._safely(self.tick, now)
        self._safely(self.schedule)
        self._safely(self._publish_load)

    def wait_s(self, now: float | None = None) -> float:
        """Seconds until the next timer (at most ``stop_check_s``)."""
        now = self.clock() if now is None else now
        due = min(self._next_rescan, now + self.stop_check_s)
        if self.lease_s is not None:  # an idle driver too says that it is alive, to get its share of the jobs
            due = min(due, self._next_renewal)
        if self._metrics.cursors:
            due = min(due, self._next_metrics)
        for job in self._jobs.values():
            timer = job.next_timer()
            if timer is not None and timer < due:
                due = timer
        return max(0.0, due - now)

    # -- events and timers ---------------------------------------------------------------------

    def handle_all(self, events: Sequence[Event]) -> None:
        """React to a batch of events, in order; the rows of the trials they say finished are read in one query
        (errors are logged, never raised)."""
        finished = [e.id for e in events if e.kind is EventKind.TRIAL_FINISHED and e.id in self._owners]
        rows: dict[int, Row[Any]] = {}
        if len(finished) > 1:
            try:
                rows = {row.id: row for row in trial_rows(self.engine, finished)}
            except Exception:
                logger.exception("reading %d finished trials at once failed; reading them one by one", len(finished))
        for event in events:
            self._safely(self.handle, event, rows)

    def handle(self, event: Event, rows: Mapping[int, Row[Any]] | None = None) -> None:
        """React to one event (the store is read for what it names, unless ``rows`` holds its trial's row already)."""
        if event.kind is EventKind.TRIAL_FINISHED:
            self._on_trial_finished(event.id, rows)
        elif event.kind is EventKind.TRIAL_STOP_REQUESTED:
            if event.id in self._owners:  # a user stopped this one trial: it ends early, its score counts
                self._tell(self.executor.request_stop, event.id, "stopped by a user")
        elif event.kind is EventKind.TRIAL_METRICS:
            if event.id in self._metrics.cursors:
                self.read_metrics()
        elif event.kind is EventKind.JOB_CREATED:
            if event.id not in self._jobs:
                self.adopt([event.id])
        elif event.kind is EventKind.JOB_STOPPED:
            job = self._jobs.get(event.id)
            if job is None:
                self.adopt([event.id])
            elif job.stop_cause is None:
                with self._guard(job):
                    status = job_status(self.engine, job.id)
                    if status is JobStatus.STOPPING:
                        self._begin_stop(job, StopCause.USER, self.clock())
                    elif status is None or status.is_finished():
                        self._forget(job)

    def tick(self, now: float | None = None) -> None:
        """Rescan the store when due; stop jobs whose deadline came; cancel what outlived a grace period."""
        now = self.clock() if now is None else now
        if self.lease_s is not None and now >= self._next_renewal:
            self._next_renewal = now + self.lease_s / 3
            self._safely(self.renew_leases, now)
        if now >= self._next_rescan:
            self._next_rescan = now + self.rescan_s
            self._safely(self.rescan)
        if self._metrics.cursors and now >= self._next_metrics:
            self._safely(self.read_metrics)
        for job in list(self._jobs.values()):
            if job.stop_cause is None and job.deadline is not None and now >= job.deadline:
                with self._guard(job):
                    self._begin_stop(job, StopCause.TIME, now)
            elif (
                job.stop_cause is not None and not job.cancelled and job.grace_end is not None and now >= job.grace_end
            ):
                with self._guard(job):
                    self._cancel_rest(job, now)

    def read_metrics(self) -> None:
        """Feed the new interim metrics of watched trials to their stopping rules; stop those a rule says to."""
        self._next_metrics = self.clock() + self.metrics_s
        for trial_id, reason in self._metrics.read(self.engine, self._owners):
            self._tell(self.executor.request_stop, trial_id, reason)

    def _on_trial_finished(self, trial_id: int, read: Mapping[int, Row[Any]] | None = None) -> None:
        owner = self._owners.get(trial_id)
        if owner is None:
            return  # not ours, or already seen (a rescan found it first)
        job, _ = owner
        with self._guard(job):
            row = None if read is None else read.get(trial_id)
            rows = [row] if row is not None else trial_rows(self.engine, [trial_id])
            now = self.clock()
            if not rows:
                self._finish_trial(trial_id, TrialState.CANCELLED, None, None, "the trial row was deleted", now)
            elif rows[0].status.is_finished():
                self._apply_row(rows[0], now)

    # -- scheduling ----------------------------------------------------------------------------

    def schedule(self) -> int:
        """Give free slots to the jobs that want them, one unit of work per slot (a trial, or a fused
        group of trials); returns how many units started.

        The pass proposes every unit first, then inserts all their trials in one transaction and
        only then submits them: a pass that fills a thousand slots costs one commit, not a thousand."""
        if not self._jobs:
            return 0
        self._send_alone()
        ahead = getattr(self.executor, "queue_ahead", 0)
        free = self.executor.slots * (1 + ahead) - sum(job.slots_held for job in self._jobs.values())
        now = self.clock()
        planned: list[Decision] = []
        units: list[_PlannedUnit] = []
        try:
            while free > 0:
                picked = self._pick(now, free, ahead, planned)
                if picked is None:
                    break
                job, sub, size = picked
                unit = None
                with self._guard(job):
                    unit = self._plan_unit(job, sub, now, size)
                if unit is not None:
                    units.append(unit)
                    free -= job.slots_per_unit
        finally:
            started = self._start_units(units, now)
        self._note_windows(now, free)
        return started

    def _note_windows(self, now: float, free: int) -> None:
        """Deterministic jobs: add up the slots the window held idle since the last pass, and store what waiting
        cost a job when a wait of it ended (what a user sees of the mode's price)."""
        for job in list(self._jobs.values()):
            if job.window_wait is not None and job.window_wait.note(job.window_held(now, free), now):
                with self._guard(job):
                    _rows.record_window(self.engine, job.id, job.window_wait.record())

    def _publish_load(self) -> None:
        units = sum(job.units for job in self._jobs.values())
        _telemetry.publish_load(jobs=len(self._jobs), trials=len(self._owners), units=units, slots=self.executor.slots)

    def _pick(
        self, now: float, free: int, ahead: int, planned: list[Decision]
    ) -> tuple[JobState, SubJobState, int | None] | None:
        """Who gets a free slot, and the most trials its unit may hold (None: as the job's fusion option
        says): the next of the placement planner's launches (``planned``, planned again once used up),
        or where there is no planner or it has nothing to weigh yet, the fixed rules."""
        if self.planner is not None:
            if not planned:
                planned.extend(
                    self.planner.decide(self._jobs.values(), now, free=free, ahead=ahead, slots=self.executor.slots)
                )
                self._safely(self._record_outlooks, now)
            while planned:
                decision = planned.pop(0)
                job, sub = decision.job, decision.sub
                wanted = (
                    self._jobs.get(job.id) is job
                    and job.units < job.unit_cap * (1 + ahead)
                    and job.slots_per_unit <= free
                )
                if wanted and isinstance(sub.next_step(job, now), PlanStep):
                    return job, sub, decision.size
        picked = pick_next(self._jobs.values(), now, ahead=ahead, free=free)
        return None if picked is None else (*picked, None)

    def _record_outlooks(self, now: float) -> None:
        """Stores what the planner told of each job, when it says something new: another fallback, or a
        prediction ``PLACEMENT_RECORD_S`` after the last one stored."""
        assert self.planner is not None
        due = {
            job_id: outlook
            for job_id, outlook in self.planner.outlooks.items()
            if (last := self._outlooks.get(job_id)) is None
            or last[1] != outlook.fallback
            or now - last[0] >= PLACEMENT_RECORD_S
        }
        if due:
            _rows.record_placements(self.engine, self.planner.method, due, now)
            self._outlooks.update({job_id: (now, outlook.fallback) for job_id, outlook in due.items()})

    def _note_profiling(self, job: JobState, sub: SubJobState, now: float) -> None:
        """Store the sub-job's fusion profiling decision on its job when it changed (profile, wait or skip):
        a few writes a job, each with why, that the job's API JSON shows."""
        kind, reason = sub.profile_gate()
        if sub.profiling_decision == kind:
            return
        sub.profiling_decision = kind
        decision = {"model": sub.model_name, "decision": kind, "reason": reason, "at": _rows.utc(now).isoformat()}
        self._safely(_rows.record_profiling, self.engine, job.id, sub.id, decision)

    def _strategy(self, sub: SubJobState) -> Strategy | None:
        """The sub-job's strategy, built on first use from the records of its finished trials."""
        if sub.strategy is not None:
            return sub.strategy
        assert sub.knob_config is not None  # a sub-job without one has a failure and wants no trials
        name = sub.strategy_name
        try:
            if name == "auto":
                name = choose_strategy(sub.knob_config)
            strategy = make_strategy(name, sub.knob_config, seed=sub.seed)
            for record in sorted(sub.history, key=lambda r: r.trial_id):
                strategy.observe(record)
        except Exception as e:
            sub.failure = f"strategy {name!r}: {type(e).__name__}: {e}"
            return None
        sub.strategy = strategy
        sub.history = []
        return strategy

    def _plan_unit(self, job: JobState, sub: SubJobState, now: float, size: int | None = None) -> _PlannedUnit | None:
        """Propose one trial, or a fused group of them (one unit of work) of at most ``size`` trials (None: as
        the job's fusion option says), and count it as started; :meth:`_start_units` stores and submits it.

        Until then its trials are in ``sub.active`` under ids of their own below zero, so that the
        rest of the pass sees them (the job's units, the strategy's pending proposals, the numbers).
        None when the sub-job's strategy failed instead."""
        step = sub.next_step(job, now)
        if not isinstance(step, PlanStep):
            return None
        strategy = self._strategy(sub)
        trials: list[_NewTrial] = []
        if strategy is not None:
            try:
                policies = trial_policies(sub.knob_config, step.policies)
                with _telemetry.PROPOSAL_SECONDS.labels(strategy.name).time():
                    trials = self._propose(job, sub, strategy, step, policies, now, size)
            except Exception as e:
                _telemetry.PROPOSAL_ERRORS.labels(strategy.name).inc()
                number = sub.next_number
                sub.failure = f"strategy {strategy.name!r} failed to propose trial {number}: {type(e).__name__}: {e}"
                strategy = None
        if strategy is None:
            logger.warning("job %s, sub-job %s: %s", job.id, sub.id, sub.failure)
            self._check_end(job, now)
            return None
        sharing = bool(policies.get(Policy.SHARE_PARAMS))
        unit = _PlannedUnit(job, sub)
        for trial in trials:
            row = _rows.NewTrial(
                sub_job_id=sub.id,
                number=trial.number,
                knobs=trial.knobs,
                policies=policies,
                phase=step.phase,
                servable=servable(policies),
                shared_params_path=sub.shared_params(trial.parent, trial.number) if sharing else None,
                fusion_profile=None if trial.profiling is None else sub.profile_request(),
            )
            self._unstored -= 1
            active = ActiveTrial(
                self._unstored,
                trial.number,
                {k: v for k, v in trial.knobs.items() if k in sub.searchable},
                phase=step.phase,
                final=step.final,
                shares=sharing and sub.shares(step.phase),
                shared_from=row.shared_params_path,
                group_size=len(trials),
                profiling=trial.profiling,
            )
            if job.share is not None:
                active.share_epoch, active.share_level = job.share.started(), job.share.level
            if len(trials) > 1:
                active.group = unit.actives[0].id if unit.actives else active.id
            unit.rows.append(row)
            unit.actives.append(active)
            sub.add_started(active)
            sub.next_number = trial.number + 1
            sub.trials += 1
            sub.active[active.id] = active
        return unit

    def _start_units(self, units: list[_PlannedUnit], now: float) -> int:
        """Store the pass's planned units in one transaction, then give their trials their ids and submit them;
        returns how many started.

        A unit whose job was dropped meanwhile (an error while planning its other units) is left out. When
        the insert fails, the jobs of the pass are dropped from memory like on any store error: the next
        rescan takes them up again from their rows, which hold none of these trials."""
        units = [unit for unit in units if self._jobs.get(unit.job.id) is unit.job]
        if not units:
            return 0
        try:
            placed = _rows.insert_units(self.engine, [unit.rows for unit in units], now)
        except Exception as e:
            for job in {id(unit.job): unit.job for unit in units}.values():
                self._fail_job(job.id, e, job)
            return 0
        started = 0
        for unit, (trial_ids, group) in zip(units, placed, strict=True):
            job, sub = unit.job, unit.sub
            if self._jobs.get(job.id) is not job:
                continue  # its submission of an earlier unit failed and ended it
            with self._guard(job):
                for active, trial_id in zip(unit.actives, trial_ids, strict=True):
                    del sub.active[active.id]
                    active.id, active.group = trial_id, group
                    sub.active[trial_id] = active
                    self._metrics.watch(sub, active)
                    self._owners[trial_id] = (job, sub)
                self.executor.submit(trial_ids if group is not None else trial_ids[0])
                _telemetry.TRIALS_STARTED.inc(len(trial_ids))
                started += 1
        return started

    def _propose(
        self,
        job: JobState,
        sub: SubJobState,
        strategy: Strategy,
        step: PlanStep,
        policies: dict[Policy, bool],
        now: float,
        size: int | None = None,
    ) -> list[_NewTrial]:
        """The next trial, and when it may run fused, the rest of its group.

        The first trial's structure (:func:`~baobab.model.structural_knobs`) decides the group's size
        (:meth:`~SubJobState.fusion_size`, or the planner's ``size``, within what the plan allows) and is pinned on the
        other members' proposals (:meth:`~baobab.advisor.Strategy.propose_batch`), so they
        differ only in the knobs a stack keeps per member (float knobs, the epochs). A template
        without such a searchable knob forms no group (its members would be one trial).
        Under fusion "auto", the first trial of a structure nobody has measured is asked to
        measure it before it trains, alone or in a group sized by the nearest measured one.
        """
        assert sub.knob_config is not None
        config = sub.knob_config
        number = sub.next_number
        if sub.window is None:
            pending = [t.proposal for t in sub.active.values()]
        else:  # deterministic: what it learns from, and what counts as pending, depend on numbers, not on timing
            sub.release_window(number)
            pending = sub.window_pending(number)
        if step.proposal is not None:
            first = step.proposal
        elif step.phase is not None:
            first = strategy.propose_for(step.phase, number, pending)
        else:
            first = strategy.propose(number, pending)
        knobs = _json_knobs(trial_knobs(config, first, policies))
        structure = structure_key(config, knobs)
        plain = step.proposal is None and step.phase is None  # a plan's phase derives from no one trial
        trials = [_NewTrial(number, knobs, strategy.parent(number, pending) if plain else None)]
        if sub.options.fusion == FusionMode.AUTO and sub.groupable(step):
            self._note_profiling(job, sub, now)
        if sub.wants_profile(step, structure):
            trials[0] = dataclasses.replace(trials[0], profiling=structure)
        pin = {name: value for name, value in first.items() if is_structural(config, name)}
        limit = sub.fusion_size(structure, job) if size is None else size
        size = sub.group_size(job, step, now, limit) if len(pin) < len(first) else 1
        if size == 1:
            return trials
        pending.append(first)
        numbers = range(number + 1, number + size)
        for offset, proposal in enumerate(strategy.propose_batch(numbers, pending, pin=pin), start=1):
            parent = strategy.parent(number + offset, pending) if plain else None
            trials.append(_NewTrial(number + offset, _json_knobs(trial_knobs(config, proposal, policies)), parent))
            pending.append(proposal)
        return trials


@dataclasses.dataclass(eq=False)
class _PlannedUnit:
    """A unit of work one scheduling pass proposed, to store and submit at the pass's end: its trials' rows,
    and their states in the sub-job (under ids below zero until stored)."""

    job: JobState
    sub: SubJobState
    rows: list[_rows.NewTrial] = dataclasses.field(default_factory=list)
    actives: list[ActiveTrial] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _NewTrial:
    """A proposed trial: its number, every knob value as stored, the trial it derives from (SHARE_PARAMS),
    and the structure whose fusion profile it measures (fusion "auto"), if any."""

    number: int
    knobs: dict[str, Any]
    parent: int | None
    profiling: str | None = None


def _json_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Knob values as JSON keeps them (tuples become lists; NaN and infinity are refused)."""
    result: dict[str, Any] = json.loads(knobs_to_json(knobs))
    return result
