"""``POST /api/v1/train_jobs/forecast``: how long a job would take on N workers, before creating it.

The body is the body that would create the job, checked the same way; ``workers`` and
``slots`` (query) describe the machines to forecast on. The forecast learns from the
finished trials of the job's templates in the jobs the caller sees, on the job's training
dataset where there are any (their wall times, knobs, fused groups and packing profiles),
and plays each placement method's plan in the simulator
(:func:`baobab.advisor.placement.forecast_job`). A template none of whose trials has
finished gives no forecast, and the answer says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from baobab.admin._access import ALL_ROLES, private_rows
from baobab.admin._auth import current_user, require_roles
from baobab.admin._cluster_offer import cluster_offer
from baobab.admin._openapi import api_doc
from baobab.admin._query import check_query_args, int_query_arg
from baobab.admin._state import admin_state
from baobab.admin._train_job_spec import CREATE_SCHEMA, TrainJobSpec, check_train_job_spec, read_train_job_spec
from baobab.advisor.placement import MAX_FORECAST_TRIALS, Machine, Measured, forecast_job, stopped_share
from baobab.exceptions import RequestError
from baobab.model import knob_config_from_json, structure_key
from baobab.store import ModelTemplate, SubJob, TrainJob, Trial, TrialState, User, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("train_job_forecast", __name__, url_prefix="/api/v1/train_jobs")

#: Finished trials of each template a forecast learns from (the latest).
_HISTORY = 200
_MAX_WORKERS = 1024
_MAX_SLOTS = 256

_FORECAST = {
    "type": "object",
    "required": ["method", "seconds", "trials_finished", "trials_unfinished", "utilisation"],
    "properties": {
        "method": {"type": "string", "description": "search, or one of the baselines (fcfs: today's rule)"},
        "seconds": {"type": "number", "description": "until the last trial ends"},
        "trials_finished": {"type": "integer", "description": "trials expected to end within TIME_HOURS"},
        "trials_unfinished": {"type": "integer"},
        "utilisation": {"type": "number", "description": "share of the workers' cores kept busy"},
    },
}
FORECAST_SCHEMA = {
    "type": "object",
    "required": ["workers", "slots", "trials", "measured_trials", "forecasts", "fallback"],
    "properties": {
        "workers": {"type": "integer"},
        "slots": {"type": "integer", "description": "trial slots (CPU threads) of each worker"},
        "trials": {"type": "integer", "description": "trials forecast"},
        "measured_trials": {"type": "integer", "description": "finished trials the forecast learned from"},
        "forecasts": {"type": "array", "items": _FORECAST},
        "fallback": {"type": ["string", "null"], "description": "why there is no forecast"},
    },
}


@blueprint.post("/forecast")
@require_roles(*ALL_ROLES)
@api_doc(
    body=CREATE_SCHEMA,
    query={
        "workers": {"type": "integer", "minimum": 1, "maximum": _MAX_WORKERS, "default": 1},
        "slots": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_SLOTS,
            "description": "trial slots of each worker (default: this platform's cpu_slots)",
        },
    },
    responses={
        200: ("the forecast of each placement method, or why there is none", FORECAST_SCHEMA),
        400: "a field of the job is bad, as when creating it; workers or slots out of range; more than "
        f"{MAX_FORECAST_TRIALS} trials in all (budget.MODEL_TRIAL_COUNT)",
    },
)
def forecast_train_job() -> dict[str, Any]:
    """The job is not created: what creating it on ``workers`` machines of ``slots`` slots would take."""
    check_query_args(("workers", "slots"))
    workers = int_query_arg("workers", 1, 1, _MAX_WORKERS)
    slots = int_query_arg("slots", admin_state().settings.cpu_slots, 1, _MAX_SLOTS)
    assert workers is not None and slots is not None
    spec = read_train_job_spec()
    count = spec.budget.model_trial_count
    if count is not None and count * len(spec.model_ids) > MAX_FORECAST_TRIALS:
        raise RequestError(
            f"a forecast plays at most {MAX_FORECAST_TRIALS} trials over all templates, and this job has "
            f"{count} x {len(spec.model_ids)}; forecast fewer (a trial's time does not depend on the count)",
            field="budget.MODEL_TRIAL_COUNT",
        )
    me = current_user()
    with session_scope(admin_state().engine) as session:
        offer = cluster_offer(session, admin_state().settings)
        check_train_job_spec(session, me, spec, cpu_slots=workers * slots, offer=offer)
        templates = [session.get_one(ModelTemplate, model_id) for model_id in spec.model_ids]  # checked just now
        kinds = [_kind(template) for template in templates]
        measured, profiles = _history(session, me, spec, templates)
    budget = spec.budget
    gpus = budget.gpu_count
    machines = [Machine(f"worker-{i}", cores=slots, slots=slots, gpus=slots if gpus else 0) for i in range(workers)]
    forecasts, fallback = forecast_job(
        kinds,
        measured,
        trials=budget.model_trial_count,
        machines=machines,
        cap=budget.workers(workers * slots),
        gpus=gpus,
        deadline=budget.time_hours * 3600 if budget.time_hours else float("inf"),
        max_group=spec.job_options.largest_group(measured=bool(profiles)),
        profiles=profiles,
        share=_share(spec),
    )
    return {
        "workers": workers,
        "slots": slots,
        "trials": sum(f.finished + f.unfinished for f in forecasts[:1]),
        "measured_trials": len(measured),
        "forecasts": [
            {
                "method": f.method,
                "seconds": round(f.makespan, 3),
                "trials_finished": f.finished,
                "trials_unfinished": f.unfinished,
                "utilisation": round(f.utilisation, 4),
            }
            for f in forecasts
        ],
        "fallback": fallback,
    }


def _kind(template: ModelTemplate) -> str:
    """How a forecast names a template (and says which one has no finished trial)."""
    return f"model {template.id} ({template.name!r})"


def _share(spec: TrainJobSpec) -> Callable[[Mapping[str, Any]], float]:
    """The share of a trial's epochs the job's early-stopping rule is expected to let run."""
    rule = spec.job_options.stopping_rule_for()
    return lambda knobs: stopped_share(rule, knobs)


def _history(
    session: Session, user: User, spec: TrainJobSpec, templates: list[ModelTemplate]
) -> tuple[list[Measured], dict[tuple[str, str], dict[int, float]]]:
    """The latest finished trials of each template in the jobs ``user`` sees, and the packing profiles
    they measured: those trained on the job's training dataset, or where none was, on any (a
    template's time depends on its data)."""
    measured: list[Measured] = []
    profiles: dict[tuple[str, str], dict[int, float]] = {}
    for template in templates:
        config = knob_config_from_json(template.knob_config)
        query = private_rows(
            select(Trial, TrainJob.budget)
            .join(SubJob, Trial.sub_job_id == SubJob.id)
            .join(TrainJob, SubJob.train_job_id == TrainJob.id)
            .where(
                SubJob.model_template_id == template.id,
                Trial.status == TrialState.COMPLETED,
                Trial.started_at.is_not(None),
                Trial.finished_at.is_not(None),
            ),
            TrainJob,
            user,
        ).order_by(Trial.id.desc())
        same_data = query.where(TrainJob.train_dataset_id == spec.train_dataset_id)
        rows = session.execute(same_data.limit(_HISTORY)).all() or session.execute(query.limit(_HISTORY)).all()
        groups = _group_sizes(session, {trial.fused_group for trial, _ in rows if trial.fused_group is not None})
        for trial, budget in rows:
            kind, structure = _kind(template), structure_key(config, trial.knobs)
            seconds = (trial.finished_at - trial.started_at).total_seconds()
            devices = 1 if (budget or {}).get("GPU_COUNT") else 0
            group = groups.get(trial.fused_group, 1) if trial.fused_group is not None else 1
            measured.append(Measured(kind, structure, trial.knobs, seconds, group, devices))
            rates = (trial.fusion_profile or {}).get("samples_per_s")
            if rates:
                profiles[(kind, structure)] = {int(size): float(rate) for size, rate in rates.items()}
    return measured, profiles


def _group_sizes(session: Session, groups: set[int]) -> dict[int, int]:
    """How many trials each fused group had (a fused trial's wall time is its group's)."""
    if not groups:
        return {}
    rows = session.execute(
        select(Trial.fused_group, func.count()).where(Trial.fused_group.in_(groups)).group_by(Trial.fused_group)
    )
    return {group: count for group, count in rows if group is not None}
