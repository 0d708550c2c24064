"""The metadata database: tables, engines, the session scope and schema versions."""

from baobab.enums import InferenceJobStatus, JobStatus, ModelAccess, TrialState, UserRole
from baobab.store._db._engine import create_engine_from_url, describe_url, session_scope
from baobab.store._db._migrate import check_schema, current_revision, head_revision, upgrade_database
from baobab.store._db._tables import (
    Base,
    Dataset,
    InferenceJob,
    InferenceMember,
    InterimMetric,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    User,
    ZooModel,
)
from baobab.store._db._trial_rows import (
    ClaimRefused,
    TrialClaim,
    add_trial_records,
    beat_trial,
    claim_trial,
    finish_trial,
)

__all__ = [
    "Base",
    "ClaimRefused",
    "Dataset",
    "InferenceJob",
    "InferenceJobStatus",
    "InferenceMember",
    "InterimMetric",
    "JobStatus",
    "ModelAccess",
    "ModelTemplate",
    "SubJob",
    "TrainJob",
    "Trial",
    "TrialClaim",
    "TrialLog",
    "TrialState",
    "User",
    "UserRole",
    "add_trial_records",
    "beat_trial",
    "check_schema",
    "claim_trial",
    "create_engine_from_url",
    "current_revision",
    "describe_url",
    "finish_trial",
    "head_revision",
    "session_scope",
    "upgrade_database",
    "ZooModel",
]
