"""Finding inference jobs as the caller may see them, and the trials each of their revisions serves.

The inference job routes and their versions routes share these.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import tuple_
from sqlalchemy.orm import Session

from baobab.admin._access import may_change, may_see_private
from baobab.admin._auth import current_user
from baobab.admin._query import MAX_ID
from baobab.admin._train_job_lookups import trial_query
from baobab.exceptions import NotFoundError
from baobab.store import InferenceJob, InferenceMember, InferenceRevision, InferenceVersion, Trial

__all__ = ["MEMBER_SCHEMA", "VersionTrials", "best_first", "member_json", "revision_versions", "visible_inference_job"]


@dataclass(frozen=True)
class VersionTrials:
    """A version of one revision, with its trials (loaded for ``trial_json``), best first."""

    name: str
    weight: float
    trials: list[Trial]


def visible_inference_job(session: Session, job_id: int, *, change: bool = False) -> InferenceJob:
    """Inference job ``job_id``, when the caller may see it, or with ``change``, change it (see :mod:`._access`).

    Raises:
        NotFoundError: there is none, or the caller may not (the same answer).
    """
    job = session.get(InferenceJob, job_id) if job_id <= MAX_ID else None  # a larger id would overflow SQLite
    allowed = may_change if change else may_see_private
    if job is None or not allowed(current_user(), job):
        raise NotFoundError(f"no inference job with id {job_id}")
    return job


#: The JSON schema of :func:`member_json`'s answer.
MEMBER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["trial_id", "model_name", "score"],
    "properties": {
        "trial_id": {"type": "integer"},
        "model_name": {"type": "string"},
        "score": {"type": ["number", "null"]},
    },
}


def member_json(trial: Trial) -> dict[str, Any]:
    """A served trial as the API shows it (the trial must come from ``trial_query``)."""
    return {"trial_id": trial.id, "model_name": trial.sub_job.model_template.name, "score": trial.score}


def best_first(trials: Collection[Trial]) -> list[Trial]:
    """``trials`` from the highest score down (unscored last, ties by id): the order a predictor ensembles them in."""
    return sorted(trials, key=lambda t: (t.score is None, -(t.score or 0.0), t.id))


def revision_versions(
    session: Session, revisions: Collection[tuple[int, int]]
) -> dict[tuple[int, int], list[VersionTrials]]:
    """The versions of each ``(inference job id, revision number)`` asked for, in their order."""
    if not revisions:
        return {}
    rows = session.execute(
        trial_query()
        .add_columns(
            InferenceRevision.inference_job_id,
            InferenceRevision.number,
            InferenceVersion.position,
            InferenceVersion.name,
            InferenceVersion.weight,
        )
        .join(InferenceMember, InferenceMember.trial_id == Trial.id)
        .join(InferenceVersion, InferenceVersion.id == InferenceMember.version_id)
        .join(InferenceRevision, InferenceRevision.id == InferenceVersion.revision_id)
        .where(tuple_(InferenceRevision.inference_job_id, InferenceRevision.number).in_(list(revisions)))
    ).all()
    grouped: dict[tuple[int, int], dict[int, tuple[str, float, list[Trial]]]] = {}
    for trial, job_id, number, position, name, weight in rows:
        versions = grouped.setdefault((job_id, number), {})
        versions.setdefault(position, (name, weight, []))[2].append(trial)
    return {
        key: [VersionTrials(name, weight, best_first(trials)) for _, (name, weight, trials) in sorted(versions.items())]
        for key, versions in grouped.items()
    }
