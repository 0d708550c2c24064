"""The metadata database: tables, engines, the session scope, schema versions, and the repository.

The repository is the set of operations that change a trial's, a sub-job's, a train
job's or an inference job's state, or a lease: ``_trial_rows`` (the worker's side of a
trial), ``_trial_control`` (the platform's side), ``_job_rows``, ``_inference_rows``,
``_inference_revisions`` (the versions an inference job serves) and ``_leases``. No
other module writes those columns; a test checks it.
"""

from baobab.enums import InferenceJobStatus, JobStatus, ModelAccess, RevisionAction, TrialState, UserRole
from baobab.store._db._batches import ID_BATCH, id_batches
from baobab.store._db._engine import create_engine_from_url, describe_url, session_scope
from baobab.store._db._inference_revisions import (
    FIRST_VERSION,
    VersionSpec,
    first_inference_revision,
    inference_revision,
    promote_inference_version,
    record_revision_error,
    record_served_revision,
    rollback_inference_revision,
    set_inference_versions,
)
from baobab.store._db._inference_rows import (
    add_inference_job,
    fail_inference_job,
    mark_inference_job_stopped,
    serve_inference_job,
    take_over_inference_jobs,
)
from baobab.store._db._job_rows import (
    add_train_job,
    fail_train_job,
    finish_sub_job,
    finish_train_job,
    record_train_job_placement,
    request_train_job_stop,
    start_train_job,
    sub_job_seed,
)
from baobab.store._db._leases import RELEASED, Lease
from baobab.store._db._migrate import check_schema, current_revision, head_revision, upgrade_database
from baobab.store._db._tables import (
    Base,
    Dataset,
    InferenceJob,
    InferenceMember,
    InferenceRevision,
    InferenceVersion,
    InterimMetric,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    User,
    ZooModel,
)
from baobab.store._db._trial_control import (
    end_trial,
    end_unfinished_trials,
    fuse_trials,
    insert_trial,
    request_trial_stop,
    requeue_trial,
    set_trial_parent,
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
    "add_inference_job",
    "add_train_job",
    "add_trial_records",
    "Base",
    "beat_trial",
    "check_schema",
    "claim_trial",
    "ClaimRefused",
    "create_engine_from_url",
    "current_revision",
    "Dataset",
    "describe_url",
    "end_trial",
    "end_unfinished_trials",
    "fail_inference_job",
    "fail_train_job",
    "finish_sub_job",
    "finish_train_job",
    "finish_trial",
    "head_revision",
    "ID_BATCH",
    "id_batches",
    "InferenceJob",
    "InferenceJobStatus",
    "InferenceMember",
    "InferenceRevision",
    "InferenceVersion",
    "inference_revision",
    "FIRST_VERSION",
    "first_inference_revision",
    "promote_inference_version",
    "record_revision_error",
    "record_served_revision",
    "RevisionAction",
    "rollback_inference_revision",
    "set_inference_versions",
    "VersionSpec",
    "fuse_trials",
    "insert_trial",
    "InterimMetric",
    "JobStatus",
    "Lease",
    "mark_inference_job_stopped",
    "ModelAccess",
    "ModelTemplate",
    "RELEASED",
    "record_train_job_placement",
    "request_train_job_stop",
    "request_trial_stop",
    "requeue_trial",
    "serve_inference_job",
    "session_scope",
    "set_trial_parent",
    "start_train_job",
    "sub_job_seed",
    "SubJob",
    "take_over_inference_jobs",
    "TrainJob",
    "Trial",
    "TrialClaim",
    "TrialLog",
    "TrialState",
    "upgrade_database",
    "User",
    "UserRole",
    "ZooModel",
]
