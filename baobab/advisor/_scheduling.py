"""The job driver's bookkeeping and its pure decisions.

Who gets the next free slot, when a job may start no more trials, when a sub-job or a
job has ended and with which status: these rules live here, on plain objects that the
driver (:mod:`baobab.advisor.driver`) keeps in step with the store. Nothing here
touches the store, the executor, the event channel or the clock (``now`` is always
passed in, as seconds since the epoch), so every rule can be tested on its own.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from baobab.advisor._base import Strategy, TrialRecord, TrialStatus
from baobab.advisor._deterministic import WindowWait
from baobab.advisor._durations import RecentDurations
from baobab.advisor._gpu_share import GpuShare
from baobab.advisor._job_options import AUTO_MAX_GROUP, FusionMode, JobOptions, ShareFrom
from baobab.advisor._packing import packed_size
from baobab.advisor._plans import Next, Outcome, Plan, PlanStep, RetrainPhase, StopCause
from baobab.advisor._stopping import StoppingRule
from baobab.enums import JobStatus, TrialState
from baobab.model import KnobConfig, Knobs, Policy

__all__ = [
    "ActiveTrial",
    "JobState",
    "SharedUpdate",
    "StopCause",
    "SubJobState",
    "first_line",
    "launch_slots",
    "pick_next",
    "record_finished",
    "record_for",
    "shared_key",
]

#: Longest error text kept from a trial in a sub-job's or a job's message.
_ERROR_CHARS = 500
#: Completed trials' run times a sub-job keeps for the placement planner (the latest).
TIMINGS_KEPT = 200
#: Distinct configurations of its best-scored searching trials a sub-job keeps for a final phase (or its
#: ``final_trials`` when more): the rest of its scored trials are its strategy's to remember, not the driver's.
BEST_KEPT = 100
#: Fusion "auto": the share of the time a sub-job's trials ran so far (slot-seconds of finished trials, their
#: profiles included) that measuring fusion profiles may take in all. A profile is granted only the headroom
#: left under it, and one runs at a time in a sub-job, so the job's profiling stays under this share of its
#: trial time (a worker may overrun a grant by the one group size it was timing; the next grant pays it back).
#: It used to be a tenth of trial count x median trial, a cap a 200-trial budget never reached: profiles
#: took 27% of a 6-minute job's trial time and none of them fused anything.
PROFILE_SHARE = 0.03
#: Seconds below which no profile is asked for: enough to time the trial alone and a stack or two.
MIN_PROFILE_S = 1.0


def first_line(text: str | None, limit: int = _ERROR_CHARS) -> str:
    """The first non-empty line of an error, cut to ``limit`` characters (messages stay one line)."""
    for line in (text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def launch_slots(threads: int | None, slot_threads: int | None) -> int:
    """The slots one launch asking ``threads`` holds where a slot has ``slot_threads`` cores (None: either not
    known, or the launch asks for no more than a slot's share): its threads' worth of slots, so that launches
    asking for more threads do not run more threads than the machine has cores."""
    if threads is None or slot_threads is None or threads <= slot_threads:
        return 1
    return math.ceil(threads / slot_threads)


def shared_key(params: str, onto: int) -> str:
    """The artifact key of the shared weights that add the update of the trial whose own parameters are at
    ``params`` onto those shared on after trial number ``onto`` of its sub-job: beside its parameters,
    ``params/trial-7.safetensors`` to ``params/trial-7-shared-onto-5.safetensors``. A name, unique per merge;
    what the weights hold is recorded in the store (``baobab.store.record_shared_merges``), not read from it."""
    stem, dot, ext = params.rpartition(".")
    return f"{stem}-shared-onto-{onto}.{ext}" if dot and "/" not in ext else f"{params}-shared-onto-{onto}"


@dataclass(frozen=True)
class SharedUpdate:
    """Shared weights to write at ``key``: ``latest + (result - start)``, trial ``trial_id``'s update
    (it started from ``start`` and ended at ``result``) added onto the ``latest`` shared weights, which
    another trial produced while it ran (see :mod:`baobab.advisor.driver._shared_weights`)."""

    trial_id: int
    key: str
    latest: str
    start: str
    result: str
    #: The number, in its sub-job, of the trial after which ``latest`` was shared on.
    onto: int


@dataclass
class ActiveTrial:
    """A trial the driver submitted and has not seen finish; ``proposal`` holds its searchable knobs.

    ``phase`` is its plan's phase (None: a plain trial); ``final`` trials run past the time budget;
    ``shares`` says whether its parameters may be shared on (SHARE_PARAMS on, in a sharing phase),
    ``shared_from`` the parameters it was handed to start from (None: it started fresh);
    ``group`` is the fused group it was submitted in (the id of the group's first trial), None alone,
    and ``group_size`` how many trials that group had; ``profiling`` the structure
    (:func:`~baobab.advisor._trial_knobs.structure_key`) whose fusion profile it was asked to
    measure, None when it measures none.
    """

    id: int
    number: int
    proposal: Knobs
    phase: str | None = None
    final: bool = False
    shares: bool = False
    shared_from: str | None = None
    group: int | None = None
    group_size: int = 1
    profiling: str | None = None
    #: Under ``resources.gpu_share``: the share's epoch and level when it started (None: not measured).
    share_epoch: int | None = None
    share_level: int = 1

    def run_alone(self) -> None:
        """It was requeued out of its group (its worker died): it runs again alone."""
        self.group, self.group_size = None, 1

    @property
    def unit(self) -> int:
        """The unit of work it runs in, which takes one slot: its group, or itself."""
        return self.id if self.group is None else self.group


@dataclass(eq=False)
class SubJobState:
    """The search over one template: counts, the strategy, and the trials in flight.

    ``trials`` counts every trial row (errored, invalid and cancelled ones too: they spent
    budget). ``invalid`` trials (an architecture that cannot be built) are an outcome of
    the search, not errors: they count toward no error limit.
    ``failure`` says why the sub-job takes no more trials although its count is not
    reached (its strategy failed, its first trials all errored); it then ends ERRORED
    with that message, whatever trials completed before. ``history`` holds the records of
    finished trials until the strategy is built (lazily, when the sub-job first gets a
    slot); from then on records go to ``strategy.observe``.

    In deterministic mode (``window`` is W, see :mod:`baobab.advisor._deterministic`),
    records wait in ``held`` until the window passes them (:meth:`release_window`), and
    ``window_proposals`` keeps the proposals of the trials a later proposal counts as pending.
    """

    id: int
    job_id: int
    model_name: str
    strategy_name: str
    seed: int
    knob_config: KnobConfig | None
    trial_count: int | None
    max_errors: int
    status: JobStatus = JobStatus.RUNNING
    error: str | None = None
    trials: int = 0
    next_number: int = 0
    completed: int = 0
    errored: int = 0
    invalid: int = 0
    cancelled: int = 0
    last_error: str | None = None
    failure: str | None = None
    policies: dict[Policy, bool] = field(default_factory=dict)
    searchable: frozenset[str] = frozenset()
    strategy: Strategy | None = None
    history: list[TrialRecord] = field(default_factory=list)
    active: dict[int, ActiveTrial] = field(default_factory=dict)
    options: JobOptions = field(default_factory=JobOptions)
    plan: Plan | None = None
    #: Trials started and finished, and run times of finished ones, per phase.
    started: Counter[str | None] = field(default_factory=Counter)
    finished: Counter[str | None] = field(default_factory=Counter)
    durations: dict[str | None, RecentDurations] = field(default_factory=dict)
    #: The best-scored distinct proposals of the searching phases, best first (ties: earlier trial), as
    #: (minus score, number, proposal): at most :data:`BEST_KEPT` (or ``final_trials``).
    best: list[tuple[float, int, Knobs]] = field(default_factory=list)
    #: Parameters later trials may start from: (score, number, params_path), in the order they finished.
    shared: list[tuple[float | None, int, str]] = field(default_factory=list)
    #: Updates to add onto the shared weights that the driver has not written yet (see :class:`SharedUpdate`).
    updates: list[SharedUpdate] = field(default_factory=list)
    rule: StoppingRule | None = None
    #: Fusion "auto": what a trial of each structure (its structure_key) measured: the size it chose,
    #: and training rows per second on one slot by group size.
    profiles: dict[str, tuple[int, dict[int, float]]] = field(default_factory=dict)
    #: The placement planner's measurements: the latest completed trials as (proposal, seconds,
    #: size of the group they ran in), and how many were ever recorded (it feeds on the new ones).
    timings: deque[tuple[Knobs, float, int]] = field(default_factory=lambda: deque(maxlen=TIMINGS_KEPT))
    timed: int = 0
    #: Seconds its trials spent measuring fusion profiles, and slot-seconds its finished trials ran (profiles
    #: included; a fused member counts its share of the slot), which bounds the former (:data:`PROFILE_SHARE`).
    profiled_s: float = 0.0
    trial_s: float = 0.0
    #: Fusion "auto": the group sizes that profiles of its template chose in earlier jobs on the same device
    #: kind (the latest first); the driver reads them when it takes the job up (:meth:`profile_gate`).
    earlier_profiles: tuple[int, ...] = ()
    #: The device kind its trials run on ("cpu" or "gpu"), which decides which earlier profiles count.
    device_kind: str = "cpu"
    #: The last :meth:`profile_gate` decision the driver stored on the job (None: none yet).
    profiling_decision: str | None = None
    #: Deterministic mode: W, trial n learning from trials numbered below n - W only; None otherwise.
    window: int | None = None
    #: Deterministic mode: records of finished trials the window has not passed yet, by trial number.
    held: dict[int, TrialRecord] = field(default_factory=dict)
    #: Deterministic mode: the proposals of the trials from the window's start on, by trial number.
    window_proposals: dict[int, Knobs] = field(default_factory=dict)

    def next_step(self, job: JobState, now: float) -> Next:
        """What the sub-job's plan says to start next (see :mod:`baobab.advisor._plans`); WAIT while the
        deterministic window waits for an earlier trial (:meth:`window_blocks`)."""
        step = self._plan_step(job, now)
        return Outcome.WAIT if isinstance(step, PlanStep) and self.window_blocks() else step

    def _plan_step(self, job: JobState, now: float) -> Next:
        if self.plan is None:
            return Outcome.DONE if not self.wants_trials() or not job.may_start(now) else PlanStep(None)
        return self.plan.next(self, job, now)

    def window_blocks(self) -> bool:
        """Deterministic mode: whether the next trial must wait, a trial numbered below it minus W still running."""
        if self.window is None:
            return False
        below = self.next_number - self.window
        return any(trial.number < below for trial in self.active.values())

    def held_by_window(self, job: JobState, now: float) -> bool:
        """Whether the plan would start a trial now and only the deterministic window holds it back."""
        return self.window_blocks() and isinstance(self._plan_step(job, now), PlanStep)

    def release_window(self, number: int) -> None:
        """Deterministic mode, before trial ``number`` is proposed: the strategy learns the results of the
        trials numbered below ``number - W`` (in number order), and the proposals before the window go."""
        assert self.window is not None
        below = number - self.window
        for done in sorted(n for n in self.held if n < below):
            _learn(self, self.held.pop(done))
        for old in [n for n in self.window_proposals if n < below]:
            del self.window_proposals[old]

    def window_pending(self, number: int) -> list[Knobs]:
        """Deterministic mode: what trial ``number`` counts as pending, the proposals of trials ``number - W``
        to ``number - 1`` in number order, whether they finished or not (which depends on timing)."""
        assert self.window is not None
        below = number - self.window
        return [proposal for n, proposal in sorted(self.window_proposals.items()) if below <= n < number]

    def group_size(self, job: JobState, step: PlanStep, now: float, limit: int) -> int:
        """How many trials the unit of work that ``step`` starts may hold, ``limit`` at most: 1, or a
        fused group's size.

        Only trials whose knobs the strategy proposes form groups (not a final retraining of
        a best configuration, nor a phase of a strategy's own plan), and no more than can end
        by the job's deadline (:meth:`JobState.fitting_group`). The members share
        ``step``: the group ends where the plan, counting each member as started, would
        start another step (the final phase) or none (the trial count).
        """
        if not self.groupable(step):
            return 1
        fitting = job.fitting_group(now)
        limit = limit if fitting is None else min(limit, fitting)
        trials, started = self.trials, self.started.copy()
        size = 1
        try:
            while size < limit:
                self.trials += 1
                self.started[step.phase] += 1
                if self.next_step(job, now) != step:
                    break
                size += 1
        finally:
            self.trials, self.started = trials, started
        return size

    @staticmethod
    def groupable(step: PlanStep) -> bool:
        """Whether the trials of ``step`` may run fused: the strategy proposes their knobs, in the search."""
        return step.proposal is None and not step.final and step.phase in (None, RetrainPhase.SEARCH)

    def fusion_size(self, structure: str, job: JobState) -> int:
        """The group size the job option ``fusion`` asks for trials of ``structure`` (a structure_key):
        ``max_group``'s K; under "auto", by the structure's profile (:func:`packed_size`), or until it is
        measured, by the profile of the nearest structure measured in the sub-job (1 when none is)."""
        if self.options.fusion != FusionMode.AUTO:
            return self.options.largest_group(measured=False)
        profile = self.profiles.get(structure) or self._nearest_profile(structure)
        if profile is None:
            return 1
        # Those running count: the last trials are split evenly with the groups still at work.
        left = None if self.trial_count is None else self.trial_count - self.trials + len(self.active)
        return packed_size(profile[1], profile[0], left, job.cap)

    def _nearest_profile(self, structure: str) -> tuple[int, dict[int, float]] | None:
        """The profile of the measured structure closest to ``structure``: the fewest knobs that differ,
        then the smallest relative differences of numeric ones (a width of 64 is nearer 32 than 256)."""
        if not self.profiles:
            return None
        mine = json.loads(structure)

        def distance(key: str) -> tuple[int, float]:
            theirs = json.loads(key)
            differing = [name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name)]
            spread = sum(_relative(mine.get(name), theirs.get(name)) for name in differing)
            return len(differing), spread

        return self.profiles[min(sorted(self.profiles), key=distance)]

    def wants_profile(self, step: PlanStep, structure: str) -> bool:
        """Under fusion "auto": whether a trial of ``step`` with ``structure`` should measure where fusing
        it pays: no trial of that structure measured it, none measures anything now (so that the grant of
        one bounds what runs: :meth:`profile_budget`), a trial is left to start after it (a group could use
        the measurement), and :meth:`profile_gate` says the template may still gain from it."""
        return (
            self.options.fusion == FusionMode.AUTO
            and self.groupable(step)
            and (self.trial_count is None or self.trial_count - self.trials >= 2)
            and structure not in self.profiles
            and all(trial.profiling is None for trial in self.active.values())
            and self.profile_gate()[0] == "profile"
        )

    def profile_gate(self) -> tuple[str, str]:
        """Whether a fusion profile of this sub-job's template is worth its cost now, and why: ("profile",
        why), ("wait", why) while the time its trials ran grants too little, or ("skip", why) for good.

        It is skipped where every profile of the template on this device kind chose group size 1 (fused
        sizes trained slower than one trial alone), in this job or an earlier one: another structure of
        it would cost as much to measure and most likely say the same. The cost is bounded, not guessed:
        a profile is granted what is left of :data:`PROFILE_SHARE` of the time the trials ran so far."""
        chosen = [best for best, _ in self.profiles.values()] + list(self.earlier_profiles)
        if chosen and max(chosen) == 1:
            here = len(self.profiles)
            return "skip", (
                f"not profiled: all {len(chosen)} fusion profiles of template {self.model_name!r} on "
                f"{self.device_kind} ({here} in this job, {len(chosen) - here} in earlier jobs) chose no fused group "
                "(fused sizes trained slower than one trial alone, or it cannot fuse)"
            )
        budget = self.profile_budget()
        share = f"{PROFILE_SHARE:.0%} of the {self.trial_s:.1f} s its trials ran, less {self.profiled_s:.1f} s spent"
        if budget < MIN_PROFILE_S:
            return "wait", f"waits: a profile would get {budget:.1f} s ({share}), under the {MIN_PROFILE_S:g} s needed"
        return "profile", f"profiles: a profile gets up to {budget:.1f} s ({share})"

    def profile_budget(self) -> float:
        """Seconds a new measurement may take: what the measurements so far left of :data:`PROFILE_SHARE` of
        the time the sub-job's trials ran (0 before one finished)."""
        return max(0.0, PROFILE_SHARE * self.trial_s - self.profiled_s)

    def profile_request(self) -> dict[str, Any]:
        """What the trial that measures a profile is asked: the largest group worth timing (no more than
        the sub-job's trials left, itself included), and its :meth:`profile_budget`."""
        left = None if self.trial_count is None else self.trial_count - self.trials
        return {
            "max_group": AUTO_MAX_GROUP if left is None else max(2, min(AUTO_MAX_GROUP, left)),
            "budget_s": round(self.profile_budget(), 3),
        }

    def best_configs(self, n: int) -> list[Knobs]:
        """The proposals of the ``n`` best-scored searching trials, distinct, best first (ties: earlier trial)."""
        return [proposal for _, _, proposal in self.best[:n]]

    def _keep_best(self, score: float, number: int, proposal: Knobs) -> None:
        rank = (-score, number)
        for i, (worse, earlier, kept) in enumerate(self.best):
            if kept == proposal:
                if (worse, earlier) <= rank:
                    return
                del self.best[i]
                break
        bisect.insort(self.best, (*rank, proposal), key=lambda item: item[:2])
        del self.best[max(BEST_KEPT, self.options.final_trials) :]

    def shared_params(self, parent: int | None = None, number: int | None = None) -> str | None:
        """The parameters SHARE_PARAMS trial ``number`` starts from: its ``parent``'s when the strategy
        named one and that trial shared its parameters (an evolution child starts where the parent it
        mutates ended), else the latest shared, or the best-scored.

        In deterministic mode only trials numbered below ``number - W`` count, and the latest is the
        highest-numbered of them rather than the last to finish."""
        shared = self.shared
        if self.window is not None and number is not None:
            shared = sorted((item for item in shared if item[1] < number - self.window), key=lambda item: item[1])
        if not shared:
            return None
        for _, done, path in shared:
            if done == parent:
                return path
        if self.options.share_from == ShareFrom.BEST:
            scored = [item for item in shared if item[0] is not None]
            if scored:
                return max(scored, key=lambda item: (item[0], -item[1]))[2]
        return shared[-1][2]

    def add_started(self, trial: ActiveTrial) -> None:
        self.started[trial.phase] += 1
        if self.window is not None:
            self.window_proposals[trial.number] = trial.proposal

    def add_finished(
        self,
        trial: ActiveTrial,
        state: TrialState,
        score: float | None,
        duration: float | None,
        params: str | None,
        profile: Mapping[str, Any] | None = None,
    ) -> None:
        """Account for a finished trial in the per-phase counts, the scored configurations, the shared
        params and the fusion profiles (``profile``: what the trial measured, when it was asked to)."""
        self.finished[trial.phase] += 1
        measuring = 0.0  # seconds the trial spent measuring a fusion profile before it trained
        if trial.profiling is not None and profile is not None and isinstance(profile.get("best"), int):
            rates = {int(size): float(rate) for size, rate in profile["samples_per_s"].items()}
            self.profiles[trial.profiling] = (profile["best"], rates)
            measuring = float(profile["seconds"])
            self.profiled_s += measuring
        if duration is not None and state is not TrialState.CANCELLED:
            self.durations.setdefault(trial.phase, RecentDurations()).add(duration)
            self.trial_s += duration / trial.group_size
        if duration is not None and state is TrialState.COMPLETED:  # a whole training, not a stopped one
            self.timings.append((trial.proposal, max(0.0, duration - measuring), trial.group_size))
            self.timed += 1
        good = state.is_scored() and score is not None and math.isfinite(score)
        observed = self.plan is None or self.plan.observed_phases is None or trial.phase in self.plan.observed_phases
        if good and observed and not trial.final:
            self._keep_best(float(score), trial.number, trial.proposal)  # type: ignore[arg-type]
        if good and trial.shares and params is not None:
            self.shared.append((score, trial.number, self._shared_after(trial, params)))

    def _shared_after(self, trial: ActiveTrial, params: str) -> str:
        """The parameters to share on after ``trial`` ended with ``params``: those themselves, or, when
        the plan adds updates up and another trial's parameters were shared on since ``trial`` started,
        the key of the latest ones plus ``trial``'s update (an :class:`SharedUpdate` the driver writes)."""
        adds = self.plan is not None and self.plan.adds_updates
        if not adds or trial.shared_from is None or not self.shared:
            return params
        _, onto, latest = self.shared[-1]
        if latest == trial.shared_from:
            return params
        update = SharedUpdate(trial.id, shared_key(params, onto), latest, trial.shared_from, params, onto)
        self.updates.append(update)
        return update.key

    def update_failed(self, update: SharedUpdate) -> None:
        """``update`` could not be written: ``shared`` hands on the trial's own parameters instead."""
        self.shared = [(s, n, update.result if path == update.key else path) for s, n, path in self.shared]

    def shares(self, phase: str | None) -> bool:
        """Whether trials of ``phase`` may share their parameters on (with SHARE_PARAMS on)."""
        return phase in (frozenset({None}) if self.plan is None else self.plan.share_phases)

    def runs_past_deadline(self, phase: str | None) -> bool:
        """Whether trials of ``phase`` are final ones, which run even after the time budget ended."""
        return self.plan is not None and phase in self.plan.final_phases

    def observes(self, trial: ActiveTrial) -> bool:
        """Whether the strategy learns from this trial (not from final retrainings: the search is over)."""
        return self.plan is None or self.plan.observed_phases is None or trial.phase in self.plan.observed_phases

    @property
    def ended(self) -> bool:
        return self.status.is_finished()

    def wants_trials(self) -> bool:
        """Whether this sub-job would start another trial if it had a slot."""
        if self.ended or self.failure is not None:
            return False
        return self.trial_count is None or self.trials < self.trial_count

    def count(self, state: TrialState, error: str | None) -> None:
        """Count a finished trial in ``state``."""
        if state.is_scored():
            self.completed += 1
        elif state is TrialState.ERRORED:
            self.errored += 1
            self.last_error = first_line(error) or self.last_error
        elif state is TrialState.INVALID:
            self.invalid += 1
        elif state is TrialState.CANCELLED:
            self.cancelled += 1

    def broken(self) -> bool:
        """True when the first ``max_errors`` trials all errored: the template is likely broken."""
        return self.completed == 0 and self.errored >= self.max_errors

    def broken_message(self) -> str:
        last = f" (last error: {self.last_error})" if self.last_error else ""
        return (
            f"its first {self.errored} trials all errored{last}; no more trials were started: "
            "fix the template and start a new job"
        )

    def outcome(self, cause: StopCause | None) -> tuple[JobStatus, str | None]:
        """The status (and error message) this sub-job ends with once none of its trials runs."""
        if cause is StopCause.USER:
            return JobStatus.STOPPED, None
        if self.failure is not None:
            return JobStatus.ERRORED, self.failure
        if self.completed:
            return JobStatus.COMPLETED, None
        if self.trials == 0:
            if cause is StopCause.TIME:
                return JobStatus.ERRORED, "no trial started before the time budget ended"
            return JobStatus.ERRORED, "no trial started before the job's time budget was nearly spent"
        invalid = f", {self.invalid} invalid" if self.invalid else ""  # named where a search space has them
        message = f"no trial completed ({self.errored} errored{invalid}, {self.cancelled} cancelled)"
        if self.last_error:
            message += f"; last error: {self.last_error}"
        return JobStatus.ERRORED, message


@dataclass(eq=False)
class JobState:
    """A train job the driver runs: its sub-jobs, limits and stop state.

    ``cap`` is how many slots its trials may hold at once, ``slots_per_unit`` how many one unit of work
    holds (:func:`launch_slots`: more than one where its launches ask for more threads than a slot
    has); ``deadline`` (epoch seconds)
    comes from its persisted start time and TIME_HOURS. ``durations`` are the
    slot-seconds of its latest finished trials (a fused member's run time over its group's size:
    its share of the slot), for the median that says whether another trial, or a group of
    them, can still finish before the deadline.
    """

    id: int
    created_at: float
    cap: int
    slots_per_unit: int = 1
    started_at: float = 0.0
    deadline: float | None = None
    time_hours: float | None = None
    trial_count: int | None = None
    sub_jobs: dict[int, SubJobState] = field(default_factory=dict)
    durations: RecentDurations = field(default_factory=RecentDurations)
    stop_cause: StopCause | None = None
    stop_reason: str = ""
    grace_end: float | None = None
    cancelled: bool = False
    #: Deterministic mode: what the window cost the job so far; None otherwise.
    window_wait: WindowWait | None = None
    #: Under ``resources.gpu_share: "auto"`` (a GPU job): how many of its trials share each GPU; None otherwise.
    share: GpuShare | None = None

    @property
    def running(self) -> int:
        """Trials submitted and not finished (pending in the executor or running)."""
        return sum(len(sub.active) for sub in self.sub_jobs.values())

    @property
    def units(self) -> int:
        """Units of work submitted and not finished: a fused group counts once (one launch)."""
        return len({trial.unit for sub in self.sub_jobs.values() for trial in sub.active.values()})

    @property
    def unit_cap(self) -> int:
        """How many units of work it may have running at once: its cap over the slots each holds (one at least)."""
        if self.share is not None:
            return self.share.cap
        return max(1, self.cap // self.slots_per_unit)

    @property
    def slots_held(self) -> int:
        """The slots its units of work hold."""
        return self.units * self.slots_per_unit

    def window_held(self, now: float, free: int) -> int:
        """Deterministic mode: how many of ``free`` slots, left after the driver started what it could, the job's
        cap would give it and only the window keeps idle (a sub-job waits for a trial below its next minus W)."""
        room = min(free // self.slots_per_unit, self.unit_cap - self.units) * self.slots_per_unit
        if self.window_wait is None or room <= 0:
            return 0
        return room if any(sub.held_by_window(self, now) for sub in self.sub_jobs.values()) else 0

    def deadline_near(self, now: float) -> bool:
        """True once a trial started now would, at the median duration, end after the deadline."""
        return self.deadline is not None and now + self.durations.median() > self.deadline

    def fitting_group(self, now: float) -> int | None:
        """The most trials a fused group started now may hold to end by the deadline, at the median
        slot-seconds of a trial; None without a deadline or a finished trial to judge by."""
        median = self.durations.median()
        if self.deadline is None or median <= 0:
            return None
        return max(1, int((self.deadline - now) / median))

    def may_start(self, now: float) -> bool:
        """Whether this job may start new trials at all (not stopping, deadline not near)."""
        return self.stop_cause is None and not self.deadline_near(now)

    def sub_job_done(self, sub: SubJobState, now: float) -> bool:
        """True when ``sub`` (not yet ended) ends now: nothing of it runs and it will start nothing more."""
        return not sub.ended and not sub.active and not isinstance(sub.next_step(self, now), PlanStep)

    def ending(self, now: float) -> tuple[list[SubJobState], bool]:
        """The sub-jobs that end now, and whether the whole job ends with them."""
        ending = [sub for sub in self.sub_jobs.values() if self.sub_job_done(sub, now)]
        done = len(ending) + sum(sub.ended for sub in self.sub_jobs.values()) == len(self.sub_jobs)
        return ending, done

    def outcome(self) -> tuple[JobStatus, str | None]:
        """The status (and error) of the job once every sub-job has ended (their ``status`` set)."""
        if self.stop_cause is StopCause.USER:
            return JobStatus.STOPPED, None
        if any(sub.status is JobStatus.COMPLETED for sub in self.sub_jobs.values()):
            return JobStatus.COMPLETED, None
        if not self.sub_jobs:
            return JobStatus.ERRORED, "the job has no sub-jobs (no model templates)"
        parts = [
            f"{sub.model_name} (sub-job {sub.id}): {sub.error or sub.status.value}" for sub in self.sub_jobs.values()
        ]
        return JobStatus.ERRORED, "no model template completed a trial: " + "; ".join(parts)

    def stop(self, cause: StopCause, grace_end: float) -> None:
        """Take no more trials, for ``cause``; what still runs at ``grace_end`` is to be cancelled."""
        self.stop_cause = cause
        self.grace_end = grace_end
        if cause is StopCause.TIME:
            self.stop_reason = f"the job's time budget ({self.time_hours:g} h) ended"
        else:
            self.stop_reason = "a user stopped the job"

    def next_timer(self) -> float | None:
        """When this job next needs the driver without an event: its deadline, or the end of its grace period."""
        if self.stop_cause is None:
            return self.deadline
        if not self.cancelled:
            return self.grace_end
        return None


def _relative(a: object, b: object) -> float:
    """How far apart two knob values are, from 0 to 1: relatively for numbers, 1 for any other difference."""
    numbers = not isinstance(a, bool) and not isinstance(b, bool)
    if numbers and isinstance(a, int | float) and isinstance(b, int | float):
        scale = max(abs(a), abs(b))
        return abs(a - b) / scale if scale else 0.0
    return 0.0 if a == b else 1.0


def _pick_sub_job(job: JobState, now: float) -> SubJobState | None:
    best: SubJobState | None = None
    for sub in job.sub_jobs.values():
        if (best is None or (len(sub.active), sub.trials, sub.id) < (len(best.active), best.trials, best.id)) and (
            isinstance(sub.next_step(job, now), PlanStep)
        ):
            best = sub
    return best


def pick_next(
    jobs: Iterable[JobState], now: float, *, ahead: int = 0, free: int | None = None
) -> tuple[JobState, SubJobState] | None:
    """Who gets the next free slot: the job with the fewest running units of work (ties: the oldest)
    among those below their cap that may start trials, and within it the sub-job with the fewest
    running trials, then the fewest trials. None when nobody wants one.

    A unit is a trial, or a fused group of trials (one launch: see :attr:`JobState.units`), and holds
    :attr:`JobState.slots_per_unit` slots; a job whose unit needs more than the ``free`` slots left
    waits for them (None: slots are not counted here).
    ``ahead``: units per slot that may wait queued in the executor besides the one that runs
    (a job's cap is then ``unit_cap * (1 + ahead)`` submitted units)."""
    best: tuple[tuple[int, float, int], JobState, SubJobState] | None = None
    for job in jobs:
        running = job.units
        if running >= job.unit_cap * (1 + ahead) or (free is not None and job.slots_per_unit > free):
            continue
        key = (running, job.created_at, job.id)
        if best is not None and key >= best[0]:
            continue
        sub = _pick_sub_job(job, now)
        if sub is not None:
            best = (key, job, sub)
    return None if best is None else (best[1], best[2])


def record_for(trial: ActiveTrial, state: TrialState, score: float | None) -> TrialRecord:
    """What a strategy learns from a finished trial: a score for COMPLETED and STOPPED, INVALID for an
    architecture that cannot be built, a failure otherwise.

    A trial run in a plan's phase carries it as ``metadata["phase"]`` (ENAS learns only from some phases)."""
    metadata: dict[str, Any] = {} if trial.phase is None else {"phase": trial.phase}
    if state.is_scored() and score is not None and math.isfinite(score):
        return TrialRecord(trial.number, trial.proposal, TrialStatus.COMPLETED, float(score), metadata)
    status = TrialStatus.INVALID if state is TrialState.INVALID else TrialStatus.FAILED
    return TrialRecord(trial.number, trial.proposal, status, metadata=metadata)


def record_finished(
    job: JobState,
    sub: SubJobState,
    trial: ActiveTrial,
    state: TrialState,
    *,
    score: float | None = None,
    duration: float | None = None,
    error: str | None = None,
    params: str | None = None,
    profile: Mapping[str, Any] | None = None,
) -> None:
    """Account for a trial that reached a final state: counts, durations, what the strategy learns,
    the fusion profile it measured.

    The one place for it, so that a driver replaying a job's rows after a restart ends with
    the same counts as the driver that saw the trials finish one by one. Records go to the
    strategy once it is built, to ``sub.history`` until then; in deterministic mode to
    ``sub.held`` first, until the window passes them (:meth:`SubJobState.release_window`).
    """
    sub.count(state, error)
    if duration is not None and state is not TrialState.CANCELLED:
        job.durations.add(duration / trial.group_size)
    sub.add_finished(trial, state, score, duration, params, profile)
    if not sub.observes(trial):
        return  # a final retraining: the search it ends is over
    record = record_for(trial, state, score)
    if sub.window is not None:
        sub.held[trial.number] = record  # the strategy learns it once the window passes it
    else:
        _learn(sub, record)


def _learn(sub: SubJobState, record: TrialRecord) -> None:
    """The sub-job's strategy observes ``record``, or once built will (``sub.history``); a failure to is the
    sub-job's failure."""
    if sub.strategy is None:
        sub.history.append(record)
        return
    try:
        sub.strategy.observe(record)
    except Exception as e:
        if sub.failure is None:
            sub.failure = f"strategy {sub.strategy.name!r} failed to observe trial {record.trial_id}: {e}"
