"""Train jobs and trials as the API shows them.

A job's trial counts and best score come from GROUP BY queries, never from loading its
trials, so a list of jobs costs three queries however many trials they ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, object_session

from baobab.admin._fusion_profile import FUSION_PROFILE_SCHEMA
from baobab.admin._openapi import register_schema
from baobab.admin._state import admin_state
from baobab.admin._train_job_time import TIME_BREAKDOWN_SCHEMA
from baobab.admin._trial_lineage import LINEAGE_SCHEMA
from baobab.advisor import EnasPhase, EnasStrategy
from baobab.model import Task, knob_config_from_json, searchable_knobs
from baobab.store import JobStatus, ModelTemplate, SubJob, TrainJob, Trial, TrialState, session_scope

__all__ = [
    "TRAIN_JOB_SCHEMA",
    "TRIAL_SCHEMA",
    "fused_group_members",
    "iso",
    "jobs_json",
    "train_job_json",
    "trial_json",
    "trials_json",
]

_TIME = {"type": "string", "format": "date-time"}
_OPTIONAL_TIME = {"type": ["string", "null"], "format": "date-time"}
_TEXT = {"type": ["string", "null"]}
_SCORE = {"type": ["number", "null"]}
_FUSED_GROUP = {
    "type": ["object", "null"],
    "description": (
        "the fused group the trial was submitted in (trials of one sub-job that one worker process trained "
        "together, as one stacked computation where their modules allow it: the trial's log says 'not fused' "
        "where they did not), null for a trial run alone; a member requeued alone leaves its group"
    ),
    "required": ["id", "size"],
    "properties": {
        "id": {"type": "integer", "description": "the id of the group's first trial"},
        "size": {"type": "integer", "minimum": 1, "description": "how many trials the group holds"},
        "members": {
            "type": "array",
            "description": "GET /trials/<id> only: the group's trials, by id",
            "items": {
                "type": "object",
                "required": ["id", "number"],
                "properties": {"id": {"type": "integer"}, "number": {"type": "integer"}},
            },
        },
    },
}
_COUNTS = {
    "type": "object",
    "description": "trials per state",
    "required": [state.value for state in TrialState],
    "properties": {state.value: {"type": "integer", "minimum": 0} for state in TrialState},
}

TRIAL_SCHEMA = register_schema(
    "Trial",
    {
        "type": "object",
        "required": [
            "id", "train_job_id", "sub_job_id", "model_id", "model_name", "number", "knobs", "policies", "status",
            "score", "created_at", "started_at", "finished_at", "duration_s", "worker", "attempts", "error",
            "has_params", "parent_zoo_model_id", "similarity", "fused_group", "fusion_profile", "time_breakdown",
        ],
        "properties": {
            "id": {"type": "integer"},
            "train_job_id": {"type": "integer"},
            "sub_job_id": {"type": "integer"},
            "model_id": {"type": "integer"},
            "model_name": {"type": "string"},
            "number": {"type": "integer"},
            "knobs": {"type": "object"},
            "policies": {"type": "object"},
            "status": {"enum": [state.value for state in TrialState]},
            "score": _SCORE,
            "created_at": _OPTIONAL_TIME,
            "started_at": _OPTIONAL_TIME,
            "finished_at": _OPTIONAL_TIME,
            "duration_s": {"type": ["number", "null"]},
            "worker": _TEXT,
            "attempts": {"type": "integer"},
            "error": _TEXT,
            "has_params": {"type": "boolean"},
            "parent_zoo_model_id": {"type": ["integer", "null"]},
            "similarity": {"type": ["number", "null"]},
            "fused_group": _FUSED_GROUP,
            "fusion_profile": {"anyOf": [FUSION_PROFILE_SCHEMA, {"type": "null"}]},
            "time_breakdown": {
                "anyOf": [TIME_BREAKDOWN_SCHEMA, {"type": "null"}],
                "description": "seconds the run spent per phase; null until a worker finished it",
            },
            "traceback": {"type": ["string", "null"], "description": "GET /trials/<id> only"},
            "phase": {
                "type": ["string", "null"],
                "description": "GET /trials/<id> only: the search phase it ran in (final: the retrain of a best one)",
            },
            "lineage": {**LINEAGE_SCHEMA, "description": "GET /trials/<id> only (a recursive query each)"},
        },
    },
)  # fmt: skip

TRAIN_JOB_SCHEMA = register_schema(
    "TrainJob",
    {
        "type": "object",
        "required": [
            "id", "app", "app_version", "task", "status", "error", "train_dataset_id", "val_dataset_id", "budget",
            "target", "seed", "owner_id", "created_at", "started_at", "finished_at", "trial_counts", "best_score",
            "budget_used", "placement", "fusion_profiling", "determinism", "gpu_share", "sub_jobs",
        ],
        "properties": {
            "id": {"type": "integer"},
            "app": {"type": "string"},
            "app_version": {"type": "integer", "minimum": 1, "description": "counted per app of its owner"},
            "task": {"enum": [task.value for task in Task]},
            "status": {"enum": [status.value for status in JobStatus]},
            "error": _TEXT,
            "train_dataset_id": {"type": "integer"},
            "val_dataset_id": {"type": "integer"},
            "budget": {"type": "object"},
            "train_args": {
                "type": "object",
                "description": "train()'s keyword arguments; left out of lists unless asked for",
            },
            "options": {
                "type": "object",
                "description": "what the job asks the platform for, as POST /api/v1/train_jobs takes them "
                "(an option left out is its default)",
            },
            "target": {
                "type": ["string", "null"],
                "description": "a tabular job's target column, which train() receives as its target argument "
                "(null: an image job, or one that names none)",
            },
            "seed": {
                "type": ["integer", "null"],
                "description": "what every proposal and trial seed derives from (null: a job older than seeds)",
            },
            "owner_id": {"type": "integer"},
            "created_at": _OPTIONAL_TIME,
            "started_at": _OPTIONAL_TIME,
            "finished_at": _OPTIONAL_TIME,
            "trial_counts": _COUNTS,
            "best_score": _SCORE,
            "budget_used": {
                "type": "object",
                "required": ["time_s", "time_limit_s", "trials", "trial_limit"],
                "properties": {
                    "time_s": {"type": "number"},
                    "time_limit_s": {"type": ["number", "null"]},
                    "trials": {"type": "integer"},
                    "trial_limit": {"type": ["integer", "null"]},
                },
            },
            "placement": {
                "type": ["object", "null"],
                "description": "null while the driver's fixed rules place trials (BAOBAB_PLACEMENT=rules)",
                "required": ["method", "fallback", "predictions"],
                "properties": {
                    "method": {"type": "string", "description": "the planner's: search or a baseline"},
                    "fallback": {
                        "type": ["string", "null"],
                        "description": "what the planner could not weigh: why the fixed rules place the job's "
                        "trials for now, or that its trials' times are guessed",
                    },
                    "predictions": {
                        "type": "array",
                        "description": "the latest: [when, the job's predicted finish, predicted utilisation]",
                        "items": {
                            "type": "array",
                            "minItems": 3,
                            "maxItems": 3,
                            "items": {"type": ["string", "number"]},
                        },
                    },
                },
            },
            "fusion_profiling": {
                "type": ["object", "null"],
                "description": 'under fusion "auto", by sub-job id: the driver\'s latest decision whether its '
                "trials measure fusion profiles (profile, wait or skip), why, and when; null otherwise",
                "additionalProperties": {
                    "type": "object",
                    "required": ["model", "decision", "reason", "at"],
                    "properties": {
                        "model": {"type": "string"},
                        "decision": {"enum": ["profile", "wait", "skip"]},
                        "reason": {"type": "string"},
                        "at": {"type": "string", "format": "date-time"},
                    },
                },
            },
            "determinism": {
                "type": ["object", "null"],
                "description": "deterministic mode's cost so far: W (a trial learns from the trials numbered below "
                "its own minus W), the seconds the job held at least one slot idle waiting for an earlier trial, "
                "and the slot-seconds so held; null for a job that is not deterministic",
                "required": ["window", "wait_s", "idle_slot_s"],
                "properties": {
                    "window": {"type": "integer", "minimum": 1},
                    "wait_s": {"type": "number", "minimum": 0},
                    "idle_slot_s": {"type": "number", "minimum": 0},
                },
            },
            "gpu_share": {
                "type": ["object", "null"],
                "description": 'under resources.gpu_share "auto": the trials per GPU now, whether that is settled, '
                "the largest GPU memory a trial needed (MiB, a context's included) and its device's, each change "
                "with its reason, and the trials that ran out of GPU memory beside others and ran again alone; "
                "null otherwise, and until the first decision",
                "required": ["level", "settled", "peak_mb", "device_mb", "changes", "retried_alone"],
                "properties": {
                    "level": {"type": "integer", "minimum": 1},
                    "settled": {"type": "boolean"},
                    "peak_mb": {"type": "integer", "minimum": 0},
                    "device_mb": {"type": ["integer", "null"]},
                    "changes": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["level", "reason"],
                            "properties": {"level": {"type": "integer"}, "reason": {"type": "string"}},
                        },
                    },
                    "retried_alone": {"type": "array", "items": {"type": "integer"}},
                },
            },
            "sub_jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "model_id", "model_name", "strategy", "status", "error", "trial_counts"],
                    "properties": {
                        "id": {"type": "integer"},
                        "model_id": {"type": "integer"},
                        "model_name": {"type": "string"},
                        "strategy": {"type": "string"},
                        "status": {"enum": [status.value for status in JobStatus]},
                        "error": _TEXT,
                        "trial_counts": _COUNTS,
                        "final_ranking": {
                            "type": "array",
                            "description": "an ENAS sub-job's final evaluations, best first, in the detail of a "
                            "job only: each architecture's score on the shared weights and, for those then trained "
                            "alone (final_train), that training's score; how well the shared weights ranked them",
                            "items": {
                                "type": "object",
                                "required": ["trial_id", "knobs", "shared_score", "standalone_trial_id",
                                             "standalone_score"],
                                "properties": {
                                    "trial_id": {"type": "integer"},
                                    "knobs": {"type": "object", "description": "the searched knobs"},
                                    "shared_score": _SCORE,
                                    "standalone_trial_id": {"type": ["integer", "null"]},
                                    "standalone_score": _SCORE,
                                },
                            },
                        },
                    },
                },
            },
        },
    },
)  # fmt: skip


def iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def trials_json(session: Session, trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """Trials as the API shows them (see :func:`trial_json`), their fused groups' sizes read in one query."""
    sizes = _group_sizes(session, {t.fused_group for t in trials if t.fused_group is not None})
    return [trial_json(trial, group_sizes=sizes) for trial in trials]


def _group_sizes(session: Session, groups: set[int]) -> dict[int, int]:
    if not groups:
        return {}
    query = select(Trial.fused_group, func.count(Trial.id)).where(Trial.fused_group.in_(groups))
    return {group: n for group, n in session.execute(query.group_by(Trial.fused_group)).all()}


def fused_group_members(session: Session, group: int) -> list[dict[str, int]]:
    """The trials of a fused group, by id (the detail of one trial lists them)."""
    query = select(Trial.id, Trial.number).where(Trial.fused_group == group).order_by(Trial.id)
    return [{"id": trial_id, "number": number} for trial_id, number in session.execute(query).all()]


def trial_json(
    trial: Trial, *, traceback: bool = False, group_sizes: Mapping[int, int] | None = None
) -> dict[str, Any]:
    """A trial as the API shows it; ``traceback`` adds the full text of an error (``GET /trials/<id>``).

    ``trial.sub_job.model_template`` must be loaded (see ``trial_query``) or the session open.
    ``duration_s`` is null until the trial has both started and finished. Where the parameters
    are stored stays hidden: ``has_params`` says whether there are any. ``group_sizes`` (see
    :func:`trials_json`) holds the size of the trial's fused group; without it, the trial's
    open session is asked.
    """
    sub_job = trial.sub_job
    group = trial.fused_group
    if group is not None and (group_sizes is None or group not in group_sizes):
        session = object_session(trial)
        assert session is not None, "trial_json of a fused trial needs its session, or group_sizes"
        group_sizes = _group_sizes(session, {group})
    assert group is None or group_sizes is not None
    data: dict[str, Any] = {
        "id": trial.id,
        "train_job_id": sub_job.train_job_id,
        "sub_job_id": trial.sub_job_id,
        "model_id": sub_job.model_template_id,
        "model_name": sub_job.model_template.name,
        "number": trial.number,
        "knobs": trial.knobs,
        "policies": trial.policies,
        "status": trial.status.value,
        "score": trial.score,
        "created_at": iso(trial.created_at),
        "started_at": iso(trial.started_at),
        "finished_at": iso(trial.finished_at),
        "duration_s": (
            (trial.finished_at - trial.started_at).total_seconds()
            if trial.started_at is not None and trial.finished_at is not None
            else None
        ),
        "worker": trial.worker,
        "attempts": trial.attempts,
        "error": trial.error,
        "has_params": trial.params_path is not None,
        "parent_zoo_model_id": trial.parent_zoo_model_id,
        "similarity": trial.similarity,
        "fused_group": None if group is None else {"id": group, "size": group_sizes[group]},
        "fusion_profile": trial.fusion_profile,
        "time_breakdown": trial.time_breakdown,
    }
    if traceback:
        data["traceback"] = trial.traceback
    return data


def train_job_json(job: TrainJob, session: Session | None = None) -> dict[str, Any]:
    """A train job as the API shows it, with its sub-jobs and trial counts.

    The counts and the best score come from GROUP BY queries, never from loading the
    trials; ``session`` is used when given, else a new one is opened.
    """
    if session is None:
        with session_scope(admin_state().engine) as own:
            return jobs_json(own, [job], rankings=True)[0]
    return jobs_json(session, [job], rankings=True)[0]


def jobs_json(
    session: Session, jobs: Sequence[TrainJob], *, train_args: bool = True, rankings: bool = False
) -> list[dict[str, Any]]:
    """Job JSON for many jobs in three queries: sub-jobs, trial counts, best scores.

    Args:
        train_args: whether to show each job's ``train_args`` (a listing leaves them out
            unless asked: they are the one field of a job that can be large).
        rankings: whether to add each ENAS sub-job's ``final_ranking`` (one more query, which reads
            its few final-phase trials, for a job with ENAS sub-jobs: the detail of a job shows it, a
            listing does not).
    """
    if not jobs:
        return []
    ids = [job.id for job in jobs]
    sub_rows = session.execute(
        select(
            SubJob.id,
            SubJob.train_job_id,
            SubJob.model_template_id,
            ModelTemplate.name,
            SubJob.strategy,
            SubJob.status,
            SubJob.error,
        )
        .join(ModelTemplate, SubJob.model_template_id == ModelTemplate.id)
        .where(SubJob.train_job_id.in_(ids))
        .order_by(SubJob.id)
    ).all()
    counts: dict[int, dict[str, int]] = {}  # sub-job id -> state -> n
    for sub_job_id, status, n in session.execute(
        select(Trial.sub_job_id, Trial.status, func.count())
        .join(Trial.sub_job)
        .where(SubJob.train_job_id.in_(ids))
        .group_by(Trial.sub_job_id, Trial.status)
    ):
        counts.setdefault(sub_job_id, {})[TrialState(status).value] = n
    best = dict(
        session.execute(
            select(SubJob.train_job_id, func.max(Trial.score))
            .join(Trial.sub_job)
            .where(SubJob.train_job_id.in_(ids), Trial.status.in_(TrialState.SCORED))
            .group_by(SubJob.train_job_id)
        ).all()
    )
    now = datetime.now(UTC)
    enas = [row[0] for row in sub_rows if row[4] == EnasStrategy.name]
    ranked = _final_rankings(session, enas) if rankings else {}
    subs: dict[int, list[dict[str, Any]]] = {job_id: [] for job_id in ids}
    for sub_id, job_id, model_id, model_name, strategy, status, error in sub_rows:
        subs[job_id].append(
            {
                "id": sub_id,
                "model_id": model_id,
                "model_name": model_name,
                "strategy": strategy,
                "status": JobStatus(status).value,
                "error": error,
                "trial_counts": _counts([counts.get(sub_id, {})]),
                **({"final_ranking": ranked[sub_id]} if sub_id in ranked else {}),
            }
        )
    return [
        {
            "id": job.id,
            "app": job.app,
            "app_version": job.app_version,
            "task": job.task.value,
            "status": job.status.value,
            "error": job.error,
            "train_dataset_id": job.train_dataset_id,
            "val_dataset_id": job.val_dataset_id,
            "budget": job.budget,
            **({"train_args": job.train_args} if train_args else {}),
            "options": job.options,
            "target": job.target,
            "seed": job.seed,
            "owner_id": job.owner_id,
            "created_at": iso(job.created_at),
            "started_at": iso(job.started_at),
            "finished_at": iso(job.finished_at),
            "trial_counts": _counts([counts.get(sub["id"], {}) for sub in subs[job.id]]),
            "best_score": best.get(job.id),
            "budget_used": _budget_used(
                job, sum(sum(counts.get(sub["id"], {}).values()) for sub in subs[job.id]), len(subs[job.id]), now
            ),
            # One column holds all four: the planner's outlook (none under the rules), the profiling decisions,
            # what deterministic mode's window cost (record_train_job_window) and the GPU share.
            "placement": {k: v for k, v in job.placement.items() if k not in _NOT_PLACEMENT}
            if job.placement and "method" in job.placement
            else None,
            "fusion_profiling": (job.placement or {}).get("profiling"),
            "determinism": (job.placement or {}).get("deterministic"),
            "gpu_share": (job.placement or {}).get("gpu_share"),
            "sub_jobs": subs[job.id],
        }
        for job in jobs
    ]


#: The keys of ``train_jobs.placement`` that are not the planner's and have JSON fields of their own.
_NOT_PLACEMENT = ("profiling", "deterministic", "gpu_share")


def _final_rankings(session: Session, sub_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """Per ENAS sub-job, its scored final evaluations (best first) each with the stand-alone training of the
    same architecture, if one ran: the searched knobs (the template's other than policy knobs) are the same."""
    if not sub_ids:
        return {}
    rows = session.execute(
        select(Trial.id, Trial.sub_job_id, Trial.phase, Trial.knobs, Trial.score, ModelTemplate.knob_config)
        .join(SubJob, SubJob.id == Trial.sub_job_id)
        .join(ModelTemplate, ModelTemplate.id == SubJob.model_template_id)
        .where(
            Trial.sub_job_id.in_(sub_ids),
            Trial.phase.in_([EnasPhase.FINAL_EVALUATE.value, EnasPhase.FINAL_TRAIN.value]),
            Trial.status.in_(TrialState.SCORED),
        )
        .order_by(Trial.id)
    ).all()
    searched: dict[int, frozenset[str]] = {}
    evaluations: dict[int, list[tuple[int, dict[str, Any], float | None]]] = {}
    alone: dict[tuple[int, str], tuple[int, float | None]] = {}
    for trial_id, sub_id, phase, knobs, score, config in rows:
        if sub_id not in searched:
            searched[sub_id] = frozenset(searchable_knobs(knob_config_from_json(config)))
        chosen = {name: value for name, value in knobs.items() if name in searched[sub_id]}
        if phase == EnasPhase.FINAL_EVALUATE.value:
            evaluations.setdefault(sub_id, []).append((trial_id, chosen, score))
        else:
            alone.setdefault((sub_id, json.dumps(chosen, sort_keys=True)), (trial_id, score))
    result: dict[int, list[dict[str, Any]]] = {}
    for sub_id, found in evaluations.items():
        entries = []
        for trial_id, chosen, score in sorted(found, key=lambda item: (-(item[2] or 0.0), item[0])):
            standalone = alone.get((sub_id, json.dumps(chosen, sort_keys=True)), (None, None))
            entries.append(
                {
                    "trial_id": trial_id,
                    "knobs": chosen,
                    "shared_score": score,
                    "standalone_trial_id": standalone[0],
                    "standalone_score": standalone[1],
                }
            )
        result[sub_id] = entries
    return result


def _budget_used(job: TrainJob, trials: int, sub_jobs: int, now: datetime) -> dict[str, Any]:
    """What the job has spent of its budget, as the job driver counts it.

    Time runs from the job's start to its end (or now); trials are trial rows, since
    MODEL_TRIAL_COUNT bounds the rows of each sub-job. A limit is null when the budget has no such key.
    """
    time_hours = job.budget.get("TIME_HOURS")
    per_model = job.budget.get("MODEL_TRIAL_COUNT")
    started, finished = job.started_at, job.finished_at
    return {
        "time_s": 0.0 if started is None else max(0.0, ((finished or now) - started).total_seconds()),
        "time_limit_s": None if time_hours is None else float(time_hours) * 3600,
        "trials": trials,
        "trial_limit": None if per_model is None else int(per_model) * sub_jobs,
    }


def _counts(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = {state.value: 0 for state in TrialState}
    for part in parts:
        for state, n in part.items():
            total[state] += n
    return total
