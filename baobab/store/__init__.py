"""Storage: metadata (SQLAlchemy + Alembic), artifacts (fsspec), parameters, dataset formats and builders.

The metadata names (tables, engines, migrations) are imported on first use: SQLAlchemy
and Alembic add about 0.4 s to start-up, which every trial process would pay for
nothing, since trials never touch the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baobab.store._artifacts import ArtifactError, ArtifactNotFoundError, ArtifactStore, params_key, validate_key
from baobab.store._builders import (
    DIGITS_CLASSES,
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_SOURCE,
    TABULAR_DATASETS,
    BuiltDataset,
    BuiltSplit,
    build_digits,
    build_fashion_mnist,
    build_tabular,
)
from baobab.store._datasets import (
    DEFAULT_TARGET,
    IMAGES_CSV,
    ImageDataset,
    TabularDataset,
    ZipLimits,
    check_compatible,
    read_image_files,
    read_tabular,
    write_image_files,
    write_tabular,
)
from baobab.store._events import Event, EventChannel, EventKind, LocalEventChannel, Subscription
from baobab.store._params import ParamsFormatError, params_from_bytes, params_to_bytes
from baobab.store._request_logs import (
    RequestLogDay,
    delete_request_logs,
    parse_log_day,
    request_log_days,
    request_log_part_key,
)
from baobab.store._resources import Gpu, Inventory, Launch
from baobab.store._trial_tokens import TRIAL_TOKEN_MAX_AGE_S, issue_trial_token, trial_of_token

if TYPE_CHECKING:
    from baobab.store._broker_events import BrokerEventChannel
    from baobab.store._db import *  # noqa: F403

_DB_NAMES = frozenset(
    {
        "add_inference_job", "add_train_job", "add_trial_records", "add_trial_records_in", "Advisor", "Base",
        "beat_advisor", "beat_trial", "drop_advisor", "fair_share", "job_sharing",
        "LIVE_S", "drop_workers",
        "MergeRecord", "record_shared_merges", "shared_merge", "SharedMerge",
        "live_workers", "report_workers", "Worker",
        "check_schema", "claim_trial", "claim_trial_in", "ClaimRefused", "create_engine_from_url",
        "current_revision", "Dataset", "delete_finished_inference_job", "describe_url",
        "end_trial", "end_unfinished_trials", "fail_inference_job", "fail_train_job", "finish_sub_job",
        "finish_train_job", "finish_trial", "finish_trial_in", "first_inference_revision", "FIRST_VERSION",
        "fuse_trials",
        "head_revision", "ID_BATCH", "id_batches", "inference_revision", "InferenceJob", "InferenceJobStatus",
        "InferenceMember", "InferenceRevision", "InferenceVersion", "insert_trials", "InterimMetric",
        "JobStatus",
        "Lease", "mark_inference_job_stopped",
        "release_login_attempt", "reserve_login_attempt", "ModelAccess", "ModelTemplate", "promote_inference_version",
        "record_revision_error", "record_served_revision", "record_train_job_placement",
        "record_train_job_gpu_share", "record_train_job_profiling", "record_train_job_window", "RELEASED",
        "request_train_job_stop", "request_trial_stop", "requeue_trial", "retry_trial_alone", "RevisionAction",
        "rollback_inference_revision", "serve_inference_job", "session_scope", "set_inference_versions",
        "set_trial_parent", "start_train_job", "sub_job_seed", "SubJob", "take_over_inference_jobs", "TrainJob",
        "Trial", "TrialClaim", "TrialLog", "trial_launch", "TrialState", "upgrade_database", "User", "UserRole",
        "VersionSpec",
        "ZooModel",
    }
)  # fmt: skip

__all__ = [
    "ArtifactError",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "params_key",
    "DEFAULT_TARGET",
    "DIGITS_CLASSES",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_SOURCE",
    "IMAGES_CSV",
    "TABULAR_DATASETS",
    "TRIAL_TOKEN_MAX_AGE_S",
    "BrokerEventChannel",
    "BuiltDataset",
    "BuiltSplit",
    "Event",
    "EventChannel",
    "Gpu",
    "Inventory",
    "Launch",
    "EventKind",
    "ImageDataset",
    "LocalEventChannel",
    "ParamsFormatError",
    "RequestLogDay",
    "Subscription",
    "TabularDataset",
    "ZipLimits",
    "build_digits",
    "build_fashion_mnist",
    "build_tabular",
    "check_compatible",
    "delete_request_logs",
    "issue_trial_token",
    "params_from_bytes",
    "params_to_bytes",
    "read_image_files",
    "read_tabular",
    "parse_log_day",
    "request_log_days",
    "request_log_part_key",
    "trial_of_token",
    "validate_key",
    "write_image_files",
    "write_tabular",
]
__all__ += sorted(_DB_NAMES)


def __getattr__(name: str) -> Any:
    if name == "BrokerEventChannel":  # kombu is imported only where cluster mode is used
        from baobab.store._broker_events import BrokerEventChannel

        return BrokerEventChannel
    if name in _DB_NAMES:
        from baobab.store import _db

        return getattr(_db, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
