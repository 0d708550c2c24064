"""The metadata tables, as SQLAlchemy declarative models.

The Alembic migrations in ``baobab/store/migrations/versions`` create exactly these
tables; a test compares the two, so a change here needs a new revision there.

Deletion rules: what a job owns (sub-jobs, trials, their metrics and logs, the
revisions, versions and members of an inference job) goes with it (ON DELETE
CASCADE). What others still use is protected (ON DELETE RESTRICT): a user who owns
anything, a dataset or a template a job trained with, a train job an inference job
serves, a trial a version of one serves. Ban users rather than delete them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from baobab.enums import (
    DatasetFormat,
    InferenceJobStatus,
    JobStatus,
    ModelAccess,
    RevisionAction,
    Task,
    TrialState,
    UserRole,
)
from baobab.store._db._types import UtcDateTime, json_column_type, string_enum, utcnow

__all__ = [
    "Base",
    "Dataset",
    "InferenceJob",
    "InferenceMember",
    "InferenceRevision",
    "InferenceVersion",
    "InterimMetric",
    "LoginFailures",
    "ModelTemplate",
    "SubJob",
    "TrainJob",
    "Trial",
    "TrialLog",
    "User",
    "ZooModel",
]

# Named constraints: PostgreSQL and SQLite then agree on names, and later migrations
# (SQLite's batch mode above all) can drop or alter a constraint by name.
_NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

_NAME = String(255)
_PATH = String(1024)
_CHECKSUM = String(64)  # SHA-256, hex


class Base(DeclarativeBase):
    """The declarative base: named constraints, UTC times, JSON dicts, VARCHAR(255) strings."""

    metadata = MetaData(naming_convention=_NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UtcDateTime(),
        dict[str, Any]: json_column_type(),
        str: _NAME,
    }


def _owner() -> Mapped[int]:
    return mapped_column(ForeignKey("users.id", ondelete="RESTRICT"), index=True)


def _created_at() -> Mapped[datetime]:
    return mapped_column(default=utcnow)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str]
    role: Mapped[UserRole] = mapped_column(string_enum(UserRole))
    banned: Mapped[bool] = mapped_column(default=False)
    # Carried in each bearer token; a ban or a role change raises it, which ends every token issued before.
    token_generation: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    created_at: Mapped[datetime] = _created_at()


class LoginFailures(Base):
    """Failed logins counted in a fixed window, per key (an account's email or a client address).

    In the metadata store, so every API process (gunicorn workers, several replicas)
    counts against the same limit; see :mod:`baobab.store._db._login_failures`.
    """

    __tablename__ = "login_failures"

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    window_started_at: Mapped[datetime] = mapped_column(index=True)
    failures: Mapped[int]


class Advisor(Base):
    """A job driver that shares the train jobs with others (``baobab advisor`` with leases), alive until
    ``expires_at``: the drivers count the live ones to take a fair share of the jobs each
    (see :mod:`baobab.store._db._leases`)."""

    __tablename__ = "advisors"

    name: Mapped[str] = mapped_column(primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(index=True)


class SharedMerge(Base):
    """Shared weights no trial wrote alone: trial ``trial_id``'s update added onto the weights the sub-job shared on
    after its trial number ``onto_number`` (``onto_trial_id``, None once that trial is gone), written at ``key``.

    A trial's lineage reads its merged start here (see ``baobab.zoo``'s lineage), not from the key's name."""

    __tablename__ = "shared_merges"

    key: Mapped[str] = mapped_column(_PATH, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), index=True)
    onto_trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="SET NULL"))
    onto_number: Mapped[int]


class Worker(Base):
    """A worker machine and what it has, as its executor last saw it (``seen_at``): the admin API checks a
    train job's resources against the live ones (see :mod:`baobab.store._db._workers`)."""

    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(primary_key=True)
    slots: Mapped[int]
    cores: Mapped[int]
    memory_mb: Mapped[int] = mapped_column(BigInteger)
    #: ``{"gpus": [{"index": 0, "name": "...", "memory_mb": 81920}, ...]}``
    devices: Mapped[dict[str, Any]]
    seen_at: Mapped[datetime] = mapped_column(index=True)


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = _owner()
    name: Mapped[str]
    format: Mapped[DatasetFormat] = mapped_column(string_enum(DatasetFormat))
    artifact_path: Mapped[str] = mapped_column(_PATH)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    checksum: Mapped[str] = mapped_column(_CHECKSUM)
    created_at: Mapped[datetime] = _created_at()

    owner: Mapped[User] = relationship()


class ModelTemplate(Base):
    """An uploaded template; ``knob_config`` is :func:`baobab.model.knob_config_to_json` text."""

    __tablename__ = "model_templates"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = _owner()
    name: Mapped[str]
    task: Mapped[Task] = mapped_column(string_enum(Task))
    class_name: Mapped[str]
    artifact_path: Mapped[str] = mapped_column(_PATH)
    checksum: Mapped[str] = mapped_column(_CHECKSUM)
    dependencies: Mapped[dict[str, Any]] = mapped_column(default=dict)
    access: Mapped[ModelAccess] = mapped_column(string_enum(ModelAccess))
    knob_config: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _created_at()

    owner: Mapped[User] = relationship()


class TrainJob(Base):
    __tablename__ = "train_jobs"
    __table_args__ = (UniqueConstraint("owner_id", "app", "app_version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = _owner()
    app: Mapped[str]
    app_version: Mapped[int]
    task: Mapped[Task] = mapped_column(string_enum(Task))
    train_dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="RESTRICT"))
    val_dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="RESTRICT"))
    budget: Mapped[dict[str, Any]]
    #: The keyword arguments of ``train()``, and nothing else.
    train_args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    #: A tabular job's target column (None for an image job, or a tabular one that names none, whose
    #: ``train()`` then keeps its own default): ``train()`` receives it as its ``target`` argument.
    target: Mapped[str | None] = mapped_column(_NAME)
    #: What the job asks the platform for (``baobab.advisor.TrainJobOptions`` as JSON; a key left out
    #: is its default): early stopping, policies, fusion, ENAS, warm start, a base model, determinism.
    options: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default=text("'{}'"))
    #: What every sub-job's seed derives from (None for jobs made before seeds were kept).
    seed: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[JobStatus] = mapped_column(string_enum(JobStatus), default=JobStatus.PENDING)
    created_at: Mapped[datetime] = _created_at()
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    driver: Mapped[str | None]
    lease_expires_at: Mapped[datetime | None]
    # Under the placement planner: its method, its fallback, and its predictions over time
    # (baobab.store.record_train_job_placement); null under the fixed rules.
    placement: Mapped[dict[str, Any] | None]

    owner: Mapped[User] = relationship()
    train_dataset: Mapped[Dataset] = relationship(foreign_keys=[train_dataset_id])
    val_dataset: Mapped[Dataset] = relationship(foreign_keys=[val_dataset_id])
    sub_jobs: Mapped[list[SubJob]] = relationship(
        back_populates="train_job", cascade="all, delete-orphan", passive_deletes=True
    )


class SubJob(Base):
    """The search over one template within a train job."""

    __tablename__ = "sub_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    train_job_id: Mapped[int] = mapped_column(ForeignKey("train_jobs.id", ondelete="CASCADE"), index=True)
    model_template_id: Mapped[int] = mapped_column(ForeignKey("model_templates.id", ondelete="RESTRICT"))
    strategy: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[JobStatus] = mapped_column(string_enum(JobStatus), default=JobStatus.PENDING)
    error: Mapped[str | None] = mapped_column(Text)

    train_job: Mapped[TrainJob] = relationship(back_populates="sub_jobs")
    model_template: Mapped[ModelTemplate] = relationship()
    trials: Mapped[list[Trial]] = relationship(
        back_populates="sub_job", cascade="all, delete-orphan", passive_deletes=True, order_by="Trial.number"
    )


class Trial(Base):
    """One training of a template with one set of knob values.

    ``number`` counts from 0 within the sub-job and is the ``trial_id`` the strategy
    proposed for; ``knobs`` and ``policies`` hold JSON values as
    :func:`baobab.model.knobs_to_json` writes them (1, 1.0 and true stay apart).
    """

    __tablename__ = "trials"
    # (sub_job_id, status, score): a job's trials counted by state and the best score read from
    # the index alone, and the best of one state found by walking it backwards (see migration 0014).
    __table_args__ = (UniqueConstraint("sub_job_id", "number"), Index(None, "sub_job_id", "status", "score"))

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_job_id: Mapped[int] = mapped_column(ForeignKey("sub_jobs.id", ondelete="CASCADE"))
    number: Mapped[int]
    knobs: Mapped[dict[str, Any]]
    policies: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[TrialState] = mapped_column(string_enum(TrialState), default=TrialState.PENDING, index=True)
    score: Mapped[float | None]
    created_at: Mapped[datetime] = _created_at()
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    worker: Mapped[str | None]
    attempts: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    params_path: Mapped[str | None] = mapped_column(_PATH)
    submitted_at: Mapped[datetime | None]
    stop_reason: Mapped[str | None] = mapped_column(Text)
    # The zoo model it was warm-started from; no foreign key, so the id stays as history after retention evicts it.
    parent_zoo_model_id: Mapped[int | None]
    similarity: Mapped[float | None]
    # The search phase the driver ran it in (None: a plain trial); see baobab.advisor's plans.
    phase: Mapped[str | None] = mapped_column(String(32))
    # The parameters it starts from under SHARE_PARAMS (another trial's params_path).
    shared_params_path: Mapped[str | None] = mapped_column(_PATH)
    # False when DOWNSCALE, QUICK_EVAL or SKIP_TRAIN was on: never a final model.
    servable: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # A SpaceModel trial that finished training: the instance's mutation record (its graph, the
    # nodes changed from the base). Deferred: lists of trials never read it.
    architecture: Mapped[dict[str, Any] | None] = mapped_column(deferred=True)
    # The fused group it was submitted in: the id of the group's first trial (the same for every
    # member), None for a trial run alone. Requeuing a trial clears it: it runs again alone.
    fused_group: Mapped[int | None] = mapped_column(index=True)
    # Under fusion "auto", on the trial picked to measure its structure: the driver's request
    # ({"max_group": K}), then the worker's measurement (baobab.model.FusionProfile.to_json()
    # plus the request). The sub-job's later groups are sized by it.
    fusion_profile: Mapped[dict[str, Any] | None]
    # Where the run's time went: seconds per phase the worker measured (baobab.enums.TimePhase
    # values but "wait", which created_at and started_at give), stored with the final state.
    time_breakdown: Mapped[dict[str, Any] | None]
    # On a GPU: the peak of its CUDA allocator and its device's total ({"peak_mb", "total_mb"}), stored with the
    # final state; how many of a job's trials may share a GPU is decided by it (baobab.advisor._gpu_share).
    gpu_memory: Mapped[dict[str, Any] | None]

    sub_job: Mapped[SubJob] = relationship(back_populates="trials")


class InterimMetric(Base):
    """Metrics a trial reported at one step (``metrics``: name to value)."""

    __tablename__ = "interim_metrics"
    __table_args__ = (Index(None, "trial_id", "step"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    step: Mapped[int]
    metrics: Mapped[dict[str, Any]]
    time: Mapped[datetime] = mapped_column(default=utcnow)

    trial: Mapped[Trial] = relationship()


class TrialLog(Base):
    __tablename__ = "trial_logs"

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), index=True)
    time: Mapped[datetime] = mapped_column(default=utcnow)
    line: Mapped[str] = mapped_column(Text)

    trial: Mapped[Trial] = relationship()


class InferenceJob(Base):
    """A served train job; only a hash of its API key is kept.

    What it serves is a list of versions (:class:`InferenceVersion`), kept per revision:
    ``revision`` is the number of the wanted one (its predictor polls it), and
    ``served_revision`` the one its predictor serves (null until one does).
    """

    __tablename__ = "inference_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = _owner()
    train_job_id: Mapped[int] = mapped_column(ForeignKey("train_jobs.id", ondelete="RESTRICT"), index=True)
    status: Mapped[InferenceJobStatus] = mapped_column(
        string_enum(InferenceJobStatus), default=InferenceJobStatus.STARTING
    )
    api_key_hash: Mapped[str | None]
    public: Mapped[bool] = mapped_column(default=False)
    #: The share of answered requests its predictor logs (0: none); see baobab.store._request_logs.
    request_log_rate: Mapped[float] = mapped_column(default=0.0, server_default=text("0"))
    predictor_url: Mapped[str | None] = mapped_column(_PATH)
    created_at: Mapped[datetime] = _created_at()
    stopped_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    driver: Mapped[str | None]
    lease_expires_at: Mapped[datetime | None]
    revision: Mapped[int] = mapped_column(default=1, server_default="1")
    served_revision: Mapped[int | None]

    owner: Mapped[User] = relationship()
    train_job: Mapped[TrainJob] = relationship()
    revisions: Mapped[list[InferenceRevision]] = relationship(
        back_populates="inference_job", cascade="all, delete-orphan", passive_deletes=True
    )


class InferenceRevision(Base):
    """One wanted state of an inference job's versions. Each change adds one; none is ever changed.

    ``parent`` is the revision a rollback of this one goes back to: the one it replaced,
    or, for a revision made by a rollback, its source's parent (so rolling back again
    goes one step further back). None for the first. ``error``: why the predictor could
    not serve it (it kept serving what it served before).
    """

    __tablename__ = "inference_revisions"
    __table_args__ = (UniqueConstraint("inference_job_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    inference_job_id: Mapped[int] = mapped_column(ForeignKey("inference_jobs.id", ondelete="CASCADE"))
    number: Mapped[int]
    action: Mapped[RevisionAction] = mapped_column(string_enum(RevisionAction))
    parent: Mapped[int | None]
    created_at: Mapped[datetime] = _created_at()
    error: Mapped[str | None] = mapped_column(Text)

    inference_job: Mapped[InferenceJob] = relationship(back_populates="revisions")
    versions: Mapped[list[InferenceVersion]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="InferenceVersion.position"
    )


class InferenceVersion(Base):
    """A named set of trials served together (ensembled), and its share of the traffic: ``weight`` over the sum."""

    __tablename__ = "inference_versions"
    __table_args__ = (UniqueConstraint("revision_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    revision_id: Mapped[int] = mapped_column(ForeignKey("inference_revisions.id", ondelete="CASCADE"))
    position: Mapped[int]
    name: Mapped[str] = mapped_column(String(64))
    weight: Mapped[float]

    members: Mapped[list[InferenceMember]] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class InferenceMember(Base):
    """A trial whose model a version of an inference job serves."""

    __tablename__ = "inference_members"

    version_id: Mapped[int] = mapped_column(ForeignKey("inference_versions.id", ondelete="CASCADE"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="RESTRICT"), primary_key=True, index=True)


class ZooModel(Base):
    """A trained PyTorch model kept in the zoo to warm-start later ones (see :mod:`baobab.zoo`).

    ``graph`` is the architecture as :meth:`baobab.zoo.ModelGraph.dumps` writes it and
    ``signature`` the part matching reads (a tenth of it); ``fingerprint`` is the
    structure's hash and ``io_signature`` its input and output shapes (``1x28x28->10``),
    so candidates are found without reading graphs. ``params_path`` holds TorchModel
    parameters (``module.<state name>``); the zoo deletes them on eviction only when
    ``owns_params`` (uploaded to the zoo), never a trial's own. A trial registers once
    (unique ``trial_id``); a deleted trial or dataset leaves the model, without the link.
    """

    __tablename__ = "zoo_models"
    __table_args__ = (Index(None, "task", "io_signature"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = _owner()
    access: Mapped[ModelAccess] = mapped_column(string_enum(ModelAccess))
    task: Mapped[Task] = mapped_column(string_enum(Task))
    name: Mapped[str]
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="SET NULL"), unique=True)
    dataset_id: Mapped[int | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"))
    score: Mapped[float]
    graph: Mapped[str] = mapped_column(Text)
    signature: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(_CHECKSUM)
    io_signature: Mapped[str]
    traced: Mapped[bool]
    node_count: Mapped[int]
    param_count: Mapped[int] = mapped_column(BigInteger)
    params_path: Mapped[str] = mapped_column(_PATH)
    owns_params: Mapped[bool]
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    times_chosen: Mapped[int] = mapped_column(default=0)
    last_chosen_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = _created_at()

    owner: Mapped[User] = relationship()
