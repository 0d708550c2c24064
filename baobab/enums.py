"""The bottom layer: enums every package may import, and that import nothing of Baobab.

Tasks and dataset formats (what a template is for) and the states and kinds kept in the
metadata database live here, so that a strategy, a template or the SDK can name a trial
state without importing the store (and SQLAlchemy with it). The states are stored as
their string values in plain string columns (never native PostgreSQL enums), so adding a
state needs no migration.
"""

from __future__ import annotations

import enum
from typing import ClassVar

__all__ = [
    "DatasetFormat",
    "InferenceJobStatus",
    "JobStatus",
    "ModelAccess",
    "RevisionAction",
    "Task",
    "TimePhase",
    "TrialState",
    "UserRole",
]


class DatasetFormat(enum.StrEnum):
    """How a dataset is laid out on disk (see ``baobab.store`` for the readers)."""

    IMAGE_FILES = "IMAGE_FILES"
    TABULAR = "TABULAR"


class Task(enum.StrEnum):
    """A kind of problem; a template is uploaded for one, a train job is created for one."""

    IMAGE_CLASSIFICATION = "IMAGE_CLASSIFICATION"
    TABULAR_CLASSIFICATION = "TABULAR_CLASSIFICATION"
    TABULAR_REGRESSION = "TABULAR_REGRESSION"

    @property
    def dataset_format(self) -> DatasetFormat:
        """The format of the datasets a job of this task trains and validates on."""
        return DatasetFormat.IMAGE_FILES if self is Task.IMAGE_CLASSIFICATION else DatasetFormat.TABULAR


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

    #: The states a job or sub-job can still leave.
    UNFINISHED: ClassVar[frozenset[JobStatus]]

    def is_finished(self) -> bool:
        """True once the job will change no more."""
        return self not in JobStatus.UNFINISHED


JobStatus.UNFINISHED = frozenset({JobStatus.PENDING, JobStatus.RUNNING, JobStatus.STOPPING})


class TrialState(enum.StrEnum):
    """Where a trial stands (named apart from :class:`baobab.advisor.TrialStatus`,
    which is only how a finished trial ended, as a strategy sees it).

    STOPPED: the platform stopped it early (its score, if any, still counts);
    CANCELLED: it was dropped before or while running and has no result;
    INVALID: the template found that its knobs describe an architecture that cannot be
    built or does not fit (:class:`~baobab.exceptions.InvalidArchitectureError`): no
    score, and, unlike ERRORED, a normal outcome of a search rather than a failure.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    ERRORED = "ERRORED"
    STOPPED = "STOPPED"
    CANCELLED = "CANCELLED"
    INVALID = "INVALID"

    #: The states a trial can still leave.
    UNFINISHED: ClassVar[frozenset[TrialState]]
    #: The final states whose score counts (an early stop keeps the score reached).
    SCORED: ClassVar[frozenset[TrialState]]
    #: The final states a worker stores for a trial it ran (CANCELLED is the platform's verdict only).
    RUN_OUTCOMES: ClassVar[frozenset[TrialState]]

    def is_finished(self) -> bool:
        """True once the trial will change no more (neither PENDING nor RUNNING)."""
        return self not in TrialState.UNFINISHED

    def is_scored(self) -> bool:
        """True when the trial ended with a score that counts: COMPLETED, or STOPPED early."""
        return self in TrialState.SCORED


class TimePhase(enum.StrEnum):
    """Where a trial's time went (``Trial.time_breakdown``, a job's time breakdown, the workers' metrics).

    The worker measures every phase but :attr:`WAIT`, which the API reads from the trial's
    row (created to started). Each second of a trial's run counts in one phase only: a
    phase inside another (warm start and data loading happen inside ``train()``) is taken
    out of the outer one.
    """

    WAIT = "wait"  # waiting for a slot: from the trial's row being created to its claim
    FETCH = "fetch"  # loading: the template fetched and imported, the datasets fetched, decoded and preprocessed
    WARM_START = "warm_start"  # zoo lookup and weight transform
    PROFILE = "profile"  # measuring fusion, when the job asks (fusion "auto")
    BUILD = "build"  # seeding, the model's constructor, reading shared parameters
    TRAIN = "train"
    EVALUATE = "evaluate"  # evaluate(), dumping the parameters and checking that they reload
    STORE = "store"  # saving the parameters to the artifact store (and, in the metrics, the final state)


TrialState.UNFINISHED = frozenset({TrialState.PENDING, TrialState.RUNNING})
TrialState.SCORED = frozenset({TrialState.COMPLETED, TrialState.STOPPED})
TrialState.RUN_OUTCOMES = TrialState.SCORED | {TrialState.ERRORED, TrialState.INVALID}


class InferenceJobStatus(enum.StrEnum):
    """Where an inference job stands."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    ERRORED = "ERRORED"
    STOPPED = "STOPPED"

    def is_finished(self) -> bool:
        """True once the job serves no more."""
        return self in (InferenceJobStatus.ERRORED, InferenceJobStatus.STOPPED)


class RevisionAction(enum.StrEnum):
    """What made a revision of an inference job's versions (its history says who wanted what, when)."""

    CREATE = "CREATE"  # the job was created: one version, "v1"
    ROLLOUT = "ROLLOUT"  # the versions and weights were set
    PROMOTE = "PROMOTE"  # one version got all the traffic
    ROLLBACK = "ROLLBACK"  # the versions went back to what they were before the last change
