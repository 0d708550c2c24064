"""What the job driver reads from the store: trial rows, job statuses, a job's rows, interim metrics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, Row, or_, select

from baobab.advisor._budget import BudgetKey
from baobab.advisor.driver._rows import leasable
from baobab.store import (
    ID_BATCH,
    InterimMetric,
    JobStatus,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    id_batches,
    session_scope,
)

__all__ = [
    "TRIAL_COLUMNS",
    "earlier_profiles",
    "interim_metrics",
    "job_rows",
    "job_status",
    "job_statuses",
    "jobs_to_adopt",
    "run_seconds",
    "trial_rows",
]

TRIAL_COLUMNS = (
    Trial.id,
    Trial.sub_job_id,
    Trial.number,
    Trial.status,
    Trial.knobs,
    Trial.score,
    Trial.attempts,
    Trial.started_at,
    Trial.finished_at,
    Trial.error,
    Trial.phase,
    Trial.policies,
    Trial.params_path,
    Trial.shared_params_path,
    Trial.fused_group,
    Trial.fusion_profile,
    Trial.gpu_memory,
)


def run_seconds(row: Row[Any]) -> float | None:
    """How long a finished trial row ran (None when it never started)."""
    if row.started_at is None or row.finished_at is None:
        return None
    return float((row.finished_at - row.started_at).total_seconds())


def trial_rows(engine: Engine, ids: Sequence[int]) -> list[Row[Any]]:
    """The :data:`TRIAL_COLUMNS` of the trials ``ids`` (those deleted are missing)."""
    if not ids:
        return []
    rows: list[Row[Any]] = []
    with session_scope(engine) as session:
        for chunk in id_batches(list(ids)):
            rows.extend(session.execute(select(*TRIAL_COLUMNS).where(Trial.id.in_(chunk))).all())
    return rows


def job_status(engine: Engine, job_id: int) -> JobStatus | None:
    with session_scope(engine) as session:
        return session.scalar(select(TrainJob.status).where(TrainJob.id == job_id))


def job_statuses(engine: Engine, known: Sequence[int]) -> dict[int, JobStatus]:
    """The status of every unfinished job, and of the ``known`` ones whatever it is."""
    with session_scope(engine) as session:
        query = select(TrainJob.id, TrainJob.status).where(
            or_(TrainJob.status.in_(JobStatus.UNFINISHED), TrainJob.id.in_(list(known)[:ID_BATCH]))
        )
        return {row.id: row.status for row in session.execute(query).all()}


def jobs_to_adopt(engine: Engine, job_ids: Iterable[int] | None, lease_for: str | None, now: float) -> list[TrainJob]:
    """Unfinished jobs in creation order (only ``job_ids`` when given; only those ``lease_for`` may lease)."""
    query = select(TrainJob).where(TrainJob.status.in_(JobStatus.UNFINISHED)).order_by(TrainJob.created_at, TrainJob.id)
    if lease_for is not None:
        query = query.where(leasable(lease_for, now))
    if job_ids is not None:
        query = query.where(TrainJob.id.in_(list(job_ids)))
    with session_scope(engine) as session:
        return list(session.scalars(query))


def job_rows(engine: Engine, job_id: int) -> tuple[list[Row[SubJob, str, str]], list[Row[*tuple[Any, ...]]]]:
    """A job's sub-jobs (with their template's name and knob config) and its trials, in id order."""
    with session_scope(engine) as session:
        subs = session.execute(
            select(SubJob, ModelTemplate.name, ModelTemplate.knob_config)
            .join(ModelTemplate, SubJob.model_template_id == ModelTemplate.id)
            .where(SubJob.train_job_id == job_id)
            .order_by(SubJob.id)
        ).all()
        trials = session.execute(
            select(*TRIAL_COLUMNS).join(Trial.sub_job).where(SubJob.train_job_id == job_id).order_by(Trial.id)
        ).all()
    return list(subs), list(trials)


#: The latest fusion profiles of a template that :func:`earlier_profiles` reads.
EARLIER_PROFILES = 20


def earlier_profiles(engine: Engine, template_id: int, job_id: int, *, gpu: bool) -> tuple[int, ...]:
    """The group sizes that the latest :data:`EARLIER_PROFILES` fusion profiles of template ``template_id``
    measured in jobs other than ``job_id`` chose, latest first, counting only jobs on the same device kind
    (GPU_COUNT above 0, or CPU slots): what :meth:`~baobab.advisor._scheduling.SubJobState.profile_gate`
    learns from across jobs. A request not answered yet (no ``best``) tells nothing and is left out."""
    chosen: list[int] = []
    with session_scope(engine) as session:
        rows = session.execute(
            select(Trial.fusion_profile, TrainJob.budget)
            .join(SubJob, Trial.sub_job_id == SubJob.id)
            .join(TrainJob, SubJob.train_job_id == TrainJob.id)
            .where(
                SubJob.model_template_id == template_id,
                SubJob.train_job_id != job_id,
                Trial.fusion_profile.is_not(None),
            )
            .order_by(Trial.id.desc())
        )
        for profile, budget in rows:
            best = profile.get("best") if isinstance(profile, dict) else None
            if isinstance(best, int) and bool((budget or {}).get(BudgetKey.GPU_COUNT)) == gpu:
                chosen.append(best)
                if len(chosen) == EARLIER_PROFILES:
                    break
    return tuple(chosen)


def interim_metrics(engine: Engine, trial_ids: Sequence[int], *, after: int = 0) -> list[Row[Any]]:
    """The interim metrics (id, trial_id, step, metrics, time) of ``trial_ids`` with an id above ``after``."""
    rows: list[Row[Any]] = []
    with session_scope(engine) as session:
        for chunk in id_batches(list(trial_ids)):
            rows.extend(
                session.execute(
                    select(
                        InterimMetric.id,
                        InterimMetric.trial_id,
                        InterimMetric.step,
                        InterimMetric.metrics,
                        InterimMetric.time,
                    )
                    .where(InterimMetric.trial_id.in_(chunk), InterimMetric.id > after)
                    .order_by(InterimMetric.id)
                ).all()
            )
    return rows
