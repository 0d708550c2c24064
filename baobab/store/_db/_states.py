"""The states and kinds stored in the metadata database.

They are stored as their string values in plain string columns (never native
PostgreSQL enums), so adding a state needs no migration.
"""

from __future__ import annotations

import enum

__all__ = ["InferenceJobStatus", "JobStatus", "ModelAccess", "TrialState", "UserRole"]


class UserRole(enum.StrEnum):
    """What a user may do: admins manage users, developers upload and train."""

    SUPERADMIN = "SUPERADMIN"
    ADMIN = "ADMIN"
    MODEL_DEVELOPER = "MODEL_DEVELOPER"
    APP_DEVELOPER = "APP_DEVELOPER"


class ModelAccess(enum.StrEnum):
    """Who may train with a model template: everyone, or its owner only."""

    PUBLIC = "PUBLIC"
    PRIVATE = "PRIVATE"


class JobStatus(enum.StrEnum):
    """Where a train job or one of its sub-jobs stands.

    STOPPING means the budget is spent or a user asked to stop: no new trials are
    proposed and running ones get a grace period before they are cancelled.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    COMPLETED = "COMPLETED"
    ERRORED = "ERRORED"
    STOPPED = "STOPPED"

    def is_finished(self) -> bool:
        """True once the job will change no more."""
        return self in (JobStatus.COMPLETED, JobStatus.ERRORED, JobStatus.STOPPED)


class TrialState(enum.StrEnum):
    """Where a trial stands (named apart from :class:`baobab.advisor.TrialStatus`,
    which is only how a finished trial ended, as a strategy sees it).

    STOPPED: the platform stopped it early (its score, if any, still counts);
    CANCELLED: it was dropped before or while running and has no result.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    ERRORED = "ERRORED"
    STOPPED = "STOPPED"
    CANCELLED = "CANCELLED"

    def is_finished(self) -> bool:
        """True once the trial will change no more (neither PENDING nor RUNNING)."""
        return self not in (TrialState.PENDING, TrialState.RUNNING)


class InferenceJobStatus(enum.StrEnum):
    """Where an inference job stands."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    ERRORED = "ERRORED"
    STOPPED = "STOPPED"

    def is_finished(self) -> bool:
        """True once the job serves no more."""
        return self in (InferenceJobStatus.ERRORED, InferenceJobStatus.STOPPED)
