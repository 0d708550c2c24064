"""The versions an inference job serves: each change of the wanted versions is a new revision.

A revision is never changed: setting the versions (a rollout), promoting one and rolling
back each add one and point ``inference_jobs.revision`` at it, in one transaction that
first locks the job's row, so two changes at once get consecutive numbers and each sees
the other's result. The predictor polls that number and, once it serves a revision,
records it (:func:`record_served_revision`).

Rolling back goes to the revision the current one replaced (its ``parent``); the new
revision takes that one's parent, so rolling back twice goes two steps back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from baobab.enums import InferenceJobStatus, RevisionAction
from baobab.exceptions import ConflictError, NotFoundError
from baobab.store._db._engine import changed_rows
from baobab.store._db._tables import InferenceJob, InferenceMember, InferenceRevision, InferenceVersion
from baobab.store._db._types import utcnow

__all__ = [
    "FIRST_VERSION",
    "LIVE",
    "VersionSpec",
    "first_inference_revision",
    "inference_revision",
    "promote_inference_version",
    "record_revision_error",
    "record_served_revision",
    "rollback_inference_revision",
    "set_inference_versions",
]

#: The name of the one version an inference job starts with.
FIRST_VERSION = "v1"
#: The statuses of a job whose predictor runs or starts.
LIVE = tuple(status for status in InferenceJobStatus if not status.is_finished())


@dataclass(frozen=True)
class VersionSpec:
    """A version as it is asked for: its name, its traffic weight, and its trials."""

    name: str
    weight: float
    trial_ids: tuple[int, ...]

    @classmethod
    def of(cls, row: InferenceVersion) -> VersionSpec:
        return cls(row.name, row.weight, tuple(sorted(member.trial_id for member in row.members)))

    def same_as(self, other: VersionSpec) -> bool:
        return (self.name, self.weight, sorted(self.trial_ids)) == (other.name, other.weight, sorted(other.trial_ids))


def inference_revision(session: Session, job_id: int, number: int) -> InferenceRevision | None:
    """Revision ``number`` of job ``job_id`` with its versions and their members loaded, or None."""
    return session.scalars(
        select(InferenceRevision)
        .where(InferenceRevision.inference_job_id == job_id, InferenceRevision.number == number)
        .options(selectinload(InferenceRevision.versions).selectinload(InferenceVersion.members))
    ).one_or_none()


def first_inference_revision(session: Session, job: InferenceJob, trial_ids: Sequence[int]) -> InferenceRevision:
    """Revision 1 of a job added in this transaction: one version, "v1", of weight 1, serving ``trial_ids``."""
    versions = [VersionSpec(FIRST_VERSION, 1.0, tuple(trial_ids))]
    return _add(session, job, 1, versions, action=RevisionAction.CREATE, parent=None, now=utcnow())


def set_inference_versions(
    session: Session, job_id: int, versions: Sequence[VersionSpec], *, now: datetime
) -> InferenceRevision:
    """Make ``versions`` (checked by the caller) what job ``job_id`` serves: a ROLLOUT revision.

    When they are what it wants already, nothing is added and the current revision is
    returned: setting the same state twice is one change (unless the predictor could not
    serve it: asking again is trying again).

    Raises:
        NotFoundError: there is no such job.
        ConflictError: the job is STOPPED or ERRORED.
    """
    job, current = _locked_job(session, job_id)
    if _same(versions, current) and current.error is None:
        return current
    return _add(
        session, job, current.number + 1, versions, action=RevisionAction.ROLLOUT, parent=current.number, now=now
    )


def promote_inference_version(session: Session, job_id: int, name: str, *, now: datetime) -> InferenceRevision:
    """Give version ``name`` all the traffic (it alone, weight 1): a PROMOTE revision, unless it is so already.

    Raises:
        NotFoundError: there is no such job, or the job wants no version ``name`` now.
        ConflictError: the job is STOPPED or ERRORED.
    """
    job, current = _locked_job(session, job_id)
    found = [v for v in current.versions if v.name == name]
    if not found:
        known = ", ".join(v.name for v in current.versions)
        raise NotFoundError(f"inference job {job_id} has no version {name!r}; its versions are {known}")
    promoted = [VersionSpec(name, 1.0, VersionSpec.of(found[0]).trial_ids)]
    if _same(promoted, current):
        return current
    return _add(
        session, job, current.number + 1, promoted, action=RevisionAction.PROMOTE, parent=current.number, now=now
    )


def rollback_inference_revision(session: Session, job_id: int, *, now: datetime) -> InferenceRevision:
    """Go back to the versions the current revision replaced: a ROLLBACK revision holding them.

    Raises:
        NotFoundError: there is no such job.
        ConflictError: the job is STOPPED or ERRORED, or its revision replaced none (nothing to go back to).
    """
    job, current = _locked_job(session, job_id)
    if current.parent is None:
        raise ConflictError(
            f"inference job {job_id} has nothing to roll back to: revision {current.number} "
            f"({current.action.value}) replaced no earlier versions"
        )
    target = inference_revision(session, job_id, current.parent)
    if target is None:  # the repository never deletes a revision
        raise ConflictError(f"inference job {job_id}: revision {current.parent} to roll back to is missing")
    restored = [VersionSpec.of(v) for v in target.versions]
    return _add(
        session, job, current.number + 1, restored, action=RevisionAction.ROLLBACK, parent=target.parent, now=now
    )


def record_served_revision(session: Session, job_id: int, served: int) -> bool:
    """The predictor of job ``job_id`` serves revision ``served`` now; False when the job is finished.

    With several predictor replicas of one job, the one that wrote last is shown.
    """
    statement = (
        update(InferenceJob)
        .where(InferenceJob.id == job_id, InferenceJob.status.in_(LIVE))
        .values(served_revision=served)
        .execution_options(synchronize_session=False)
    )
    return bool(changed_rows(session, statement))


def record_revision_error(session: Session, job_id: int, number: int, error: str) -> bool:
    """The predictor could not serve revision ``number`` of job ``job_id`` (and kept serving what it did); why."""
    statement = (
        update(InferenceRevision)
        .where(InferenceRevision.inference_job_id == job_id, InferenceRevision.number == number)
        .values(error=error)
        .execution_options(synchronize_session=False)
    )
    return bool(changed_rows(session, statement))


def _locked_job(session: Session, job_id: int) -> tuple[InferenceJob, InferenceRevision]:
    """Job ``job_id``, its row locked until the transaction ends, and its wanted revision.

    On PostgreSQL ``FOR UPDATE`` makes a second change wait for the first; SQLite's
    transactions (``BEGIN IMMEDIATE``) run one at a time anyway.
    """
    job = session.scalars(
        select(InferenceJob)
        .where(InferenceJob.id == job_id)
        .with_for_update()
        .execution_options(populate_existing=True)  # the locked row, not what the session read before the lock
    ).one_or_none()
    if job is None:
        raise NotFoundError(f"no inference job with id {job_id}")
    if job.status.is_finished():
        raise ConflictError(
            f"inference job {job_id} is {job.status.value}; its versions can change only while it is "
            "STARTING or RUNNING (create a new inference job to serve again)"
        )
    current = inference_revision(session, job_id, job.revision)
    if current is None:  # every job is made with revision 1 (the migration gave old ones theirs)
        raise ConflictError(f"inference job {job_id} has no revision {job.revision}")
    return job, current


def _same(versions: Sequence[VersionSpec], revision: InferenceRevision) -> bool:
    current = [VersionSpec.of(v) for v in revision.versions]
    return len(versions) == len(current) and all(a.same_as(b) for a, b in zip(versions, current, strict=True))


def _add(
    session: Session,
    job: InferenceJob,
    number: int,
    versions: Sequence[VersionSpec],
    *,
    action: RevisionAction,
    parent: int | None,
    now: datetime,
) -> InferenceRevision:
    """Revision ``number`` of ``job`` holding ``versions``, made the wanted one; flushed."""
    row = InferenceRevision(inference_job_id=job.id, number=number, action=action, parent=parent, created_at=now)
    row.versions = [
        InferenceVersion(
            position=position,
            name=version.name,
            weight=version.weight,
            members=[InferenceMember(trial_id=trial_id) for trial_id in version.trial_ids],
        )
        for position, version in enumerate(versions)
    ]
    session.add(row)
    job.revision = number
    session.flush()
    return row
