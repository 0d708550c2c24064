"""A job rebuilt from its rows: what the driver holds in memory for a job it takes up, or finds again
after a restart.

Pure: the caller reads the rows and writes what the replay decided (lost trials). Finished
trials are accounted for by the same :func:`~baobab.advisor._scheduling.record_finished` as
on the live path, so the rebuilt counts, durations and strategy history are those the
driver had. A trial PENDING or RUNNING in the store that the executor does not hold was
lost: it is to run again (same row and knobs, alone: a lost member of a fused group leaves its
group) unless the job is stopping or it was tried ``max_attempts`` times.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from baobab.advisor._budget import parse_budget
from baobab.advisor._deterministic import WindowWait
from baobab.advisor._gpu_share import GpuShare
from baobab.advisor._job_options import GpuShareChoice, JobOptions, parse_job_options
from baobab.advisor._job_plan import check_job_plan
from baobab.advisor._plans import options_plan
from baobab.advisor._scheduling import ActiveTrial, JobState, StopCause, SubJobState, launch_slots, record_finished
from baobab.advisor._trial_knobs import trial_policies
from baobab.advisor.driver._reads import run_seconds
from baobab.exceptions import StrategyError
from baobab.model import Policy, knob_config_from_json, knobs_from_json, searchable_knobs, structure_key
from baobab.store import JobStatus, SubJob, TrainJob, TrialState

__all__ = ["Lost", "job_state", "lost_outcome", "replay_trials", "sub_job_state"]


@dataclass(frozen=True)
class Lost:
    """A lost trial's row and what becomes of it: PENDING (run again), or a final state with ``error``."""

    row: Row[Any]
    state: TrialState
    error: str | None


def lost_outcome(job: JobState, attempts: int, max_attempts: int) -> tuple[TrialState, str | None]:
    """What becomes of a trial lost after ``attempts`` tries: cancelled when the job stops, errored after
    ``max_attempts``, PENDING (run again) otherwise."""
    if job.stop_cause is not None:
        return TrialState.CANCELLED, f"lost (its worker or the platform stopped) after {job.stop_reason}"
    if attempts >= max_attempts:
        return TrialState.ERRORED, (
            f"lost {attempts} times (its worker or the platform stopped while it ran); not run again"
        )
    return TrialState.PENDING, None


def job_state(
    row: TrainJob,
    status: JobStatus,
    started_at: datetime | None,
    now: float,
    *,
    cpu_slots: int,
    grace_s: float,
    slot_threads: int | None = None,
) -> tuple[JobState, JobOptions]:
    """The job's limits and stop state from its row (its deadline from the persisted ``started_at``).

    Args:
        slot_threads: the cores of a CPU slot, as the executor tells (None: not known): a CPU job whose
            launches ask for more threads holds more slots with each (:func:`launch_slots`).
    """
    budget = parse_budget(row.budget, stored=True)
    options = parse_job_options(row.options, trial_count=budget.model_trial_count)
    deadline = None
    if budget.time_hours is not None and started_at is not None:
        deadline = started_at.timestamp() + budget.time_hours * 3600
    job = JobState(
        id=row.id,
        created_at=row.created_at.timestamp(),
        started_at=started_at.timestamp() if started_at is not None else now,
        cap=budget.workers(cpu_slots),
        slots_per_unit=1 if budget.gpu_count else launch_slots(options.threads, slot_threads),
        deadline=deadline,
        time_hours=budget.time_hours,
        trial_count=budget.model_trial_count,
    )
    # Decided before the trials are read: a stopping job's lost trials are cancelled, not run again.
    if deadline is not None and now >= deadline:
        job.stop(StopCause.TIME, now + grace_s)
    elif status is JobStatus.STOPPING:
        job.stop(StopCause.USER, now + grace_s)
    if budget.gpu_count and options.gpu_share is GpuShareChoice.AUTO:  # the level it reached before, if any
        job.share = GpuShare.from_record(budget.gpu_count, (row.placement or {}).get("gpu_share"))
    if options.deterministic:  # the window the job started with, and what waiting cost it so far
        job.window_wait = WindowWait.from_record((row.placement or {}).get("deterministic"))
    return job, options


def sub_job_state(
    row: SubJob, model_name: str, knob_config_text: str, job: JobState, options: JobOptions, max_errors: int
) -> SubJobState:
    """A sub-job with no trials counted yet, its plan built (a plan that cannot be is its failure)."""
    sub = SubJobState(
        id=row.id,
        job_id=row.train_job_id,
        model_name=model_name,
        strategy_name=row.strategy,
        seed=row.seed,
        knob_config=None,
        trial_count=job.trial_count,
        max_errors=max_errors,
        status=row.status if row.status.is_finished() else JobStatus.RUNNING,
        error=row.error,
        options=options,
        window=None if job.window_wait is None else job.window_wait.window,
    )
    try:
        sub.knob_config = knob_config_from_json(knob_config_text)
    except Exception as e:
        sub.failure = f"the template's knob config cannot be read: {type(e).__name__}: {e}"
        return sub
    sub.policies = trial_policies(sub.knob_config)
    sub.searchable = frozenset(searchable_knobs(sub.knob_config))
    try:
        sub.plan = check_job_plan(
            row.strategy,
            sub.knob_config,
            options,
            trial_count=job.trial_count,
            time_hours=job.time_hours,
            workers=job.cap,
        )
    except StrategyError as e:
        sub.failure = str(e)
        sub.plan = options_plan(options, frozenset(sub.policies))
    return sub


def replay_trials(job: JobState, trials: Sequence[Row[Any]], held: set[int], max_attempts: int) -> list[Lost]:
    """Account for the job's trial rows in id order; returns the lost ones (PENDING ones stay active)."""
    lost: list[Lost] = []
    group_sizes = Counter(row.fused_group for row in trials if row.fused_group is not None)
    for row in trials:
        sub = job.sub_jobs[row.sub_job_id]
        sub.trials += 1
        sub.next_number = max(sub.next_number, row.number + 1)
        knobs = row.knobs if isinstance(row.knobs, Mapping) else knobs_from_json(row.knobs)
        active = ActiveTrial(
            row.id,
            row.number,
            {k: v for k, v in knobs.items() if k in sub.searchable},
            phase=row.phase,
            final=sub.runs_past_deadline(row.phase),
            shares=bool((row.policies or {}).get(Policy.SHARE_PARAMS)) and sub.shares(row.phase),
            shared_from=row.shared_params_path,
            group=row.fused_group,
            group_size=1 if row.fused_group is None else group_sizes[row.fused_group],
            profiling=_profiling(sub, knobs, row.fusion_profile),
        )
        sub.add_started(active)
        if row.status.is_finished():
            duration = run_seconds(row)
            record_finished(
                job,
                sub,
                active,
                row.status,
                score=row.score,
                duration=duration,
                error=row.error,
                params=row.params_path,
                profile=row.fusion_profile,
            )
        elif row.id in held:
            sub.active[row.id] = active
        else:
            state, error = lost_outcome(job, row.attempts, max_attempts)
            lost.append(Lost(row, state, error))
            if state is TrialState.PENDING:
                active.run_alone()  # requeued: it runs again alone
                sub.active[row.id] = active
            else:
                record_finished(job, sub, active, state, error=error)
    for sub in job.sub_jobs.values():
        if sub.failure is None and not sub.ended and sub.broken():
            sub.failure = sub.broken_message()
    return lost


def _profiling(sub: SubJobState, knobs: Mapping[str, Any], profile: Mapping[str, Any] | None) -> str | None:
    """The structure a trial row was asked to measure the fusion profile of (its row holds the request)."""
    if profile is None or sub.knob_config is None:
        return None
    return structure_key(sub.knob_config, knobs)
