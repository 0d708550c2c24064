"""What a predictor serves, read from the store: the job when it starts, its versions whenever they change.

The job (its task, its key, how a query looks: from the header of the training CSV or
the first training image) is read once. What it serves is a revision of its versions
(:mod:`baobab.store._db._inference_revisions`): the wanted one at start, then each new
one :class:`RevisionStore` finds. The predictor needs no dataset after start, and the
database only for its versions.
"""

from __future__ import annotations

import csv
import io
import logging
import zipfile
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from baobab import Settings
from baobab._sandbox import Confinement, protected_paths
from baobab.exceptions import BaobabError
from baobab.model import DatasetFormat, Task, knob_config_from_json, structure_key
from baobab.predictor._queries import QueryFormat
from baobab.store import (
    DEFAULT_TARGET,
    IMAGES_CSV,
    ArtifactStore,
    InferenceJob,
    ModelTemplate,
    SubJob,
    Trial,
    create_engine_from_url,
    inference_revision,
    record_revision_error,
    record_served_revision,
    session_scope,
)
from baobab.worker import InferenceSpec

__all__ = ["MemberSpec", "PredictorJob", "Revision", "RevisionStore", "Version", "load_job"]

logger = logging.getLogger("baobab.predictor")


class JobNotServableError(BaobabError):
    """The inference job is missing, finished, or has a version without members."""


@dataclass(frozen=True)
class MemberSpec:
    """One served trial: who it is, how good it was, and what its worker loads.

    ``structure`` is its structural knobs (:func:`~baobab.model.structure_key`): members
    of one template and one structure may answer stacked, in one worker.
    """

    trial_id: int
    score: float | None
    model_name: str
    worker: InferenceSpec
    structure: str


@dataclass(frozen=True)
class Version:
    """A named set of members (best first) and its traffic weight."""

    name: str
    weight: float
    members: tuple[MemberSpec, ...]

    @property
    def key(self) -> tuple[int, ...]:
        """Its trial ids, sorted: versions with one key can share their workers."""
        return tuple(sorted(member.trial_id for member in self.members))


@dataclass(frozen=True)
class Revision:
    """What the job serves at one revision: its versions, in the order they were given."""

    number: int
    versions: tuple[Version, ...]


@dataclass(frozen=True)
class PredictorJob:
    """An inference job as the predictor serves it.

    ``revision`` is what the job wanted when the predictor started; ``served_revision``
    what a predictor served before (the fallback when the wanted one cannot load).

    ``request_log_rate`` is the share of answered requests it logs (0: none).
    """

    id: int
    task: Task
    public: bool
    api_key_hash: str | None
    owner_id: int
    query_format: QueryFormat
    revision: Revision
    served_revision: int | None
    request_log_rate: float = 0.0


def load_job(settings: Settings, job_id: int) -> PredictorJob:
    """Read inference job ``job_id`` and everything its predictor needs.

    Raises:
        JobNotServableError: no such job, the job is STOPPED or ERRORED, or a version has no members.
        StoreError: the database cannot be read.
    """
    store = ArtifactStore(settings.artifacts_url)
    engine = create_engine_from_url(settings.database_url)
    try:
        with session_scope(engine) as session:
            job = session.get(InferenceJob, job_id)
            if job is None:
                raise JobNotServableError(f"there is no inference job {job_id}")
            if job.status.is_finished():
                raise JobNotServableError(f"inference job {job_id} is {job.status}; there is nothing to serve")
            train_job = job.train_job
            revision = _read_revision(session, settings, job_id, job.owner_id, job.revision)
            dataset = train_job.train_dataset
            task, target = train_job.task, train_job.target
            public, api_key_hash, owner, served = job.public, job.api_key_hash, job.owner_id, job.served_revision
            request_log_rate = job.request_log_rate
            dataset_key, dataset_format = dataset.artifact_path, dataset.format
    finally:
        engine.dispose()
    query_format = _query_format(store, task, dataset_key, dataset_format, DEFAULT_TARGET if target is None else target)
    return PredictorJob(job_id, task, public, api_key_hash, owner, query_format, revision, served, request_log_rate)


class RevisionStore:
    """The predictor's link to its job's versions after start: which revision is wanted, what it holds, what is served.

    One engine for the predictor's life; each call is one short transaction (on SQLite,
    a poll holds the write lock for a moment: ``BEGIN IMMEDIATE``).
    """

    def __init__(self, settings: Settings, job: PredictorJob) -> None:
        self._settings = settings
        self._job_id = job.id
        self._owner_id = job.owner_id
        self._engine = create_engine_from_url(settings.database_url)

    def wanted(self) -> int | None:
        """The number of the revision the job wants now; None when the job is gone or finished.

        Raises:
            StoreError: the database cannot be read.
        """
        with session_scope(self._engine) as session:
            row = session.execute(
                select(InferenceJob.revision, InferenceJob.status).where(InferenceJob.id == self._job_id)
            ).one_or_none()
        return None if row is None or row.status.is_finished() else row.revision

    def read(self, number: int) -> Revision:
        """Revision ``number`` with its members' specs.

        Raises:
            JobNotServableError: there is no such revision, or a version of it has no members.
            StoreError: the database cannot be read.
        """
        with session_scope(self._engine) as session:
            return _read_revision(session, self._settings, self._job_id, self._owner_id, number)

    def record_served(self, number: int) -> None:
        """Revision ``number`` is served now (see :func:`baobab.store.record_served_revision`)."""
        with session_scope(self._engine) as session:
            record_served_revision(session, self._job_id, number)

    def record_failed(self, number: int, error: str) -> None:
        """Revision ``number`` could not be served, because of ``error``."""
        with session_scope(self._engine) as session:
            record_revision_error(session, self._job_id, number, error)

    def close(self) -> None:
        self._engine.dispose()


def _read_revision(session: Session, settings: Settings, job_id: int, owner_id: int, number: int) -> Revision:
    row = inference_revision(session, job_id, number)
    if row is None:
        raise JobNotServableError(f"inference job {job_id} has no revision {number}")
    trial_ids = {member.trial_id for version in row.versions for member in version.members}
    found = session.execute(
        select(Trial, ModelTemplate)
        .join(SubJob, SubJob.id == Trial.sub_job_id)
        .join(ModelTemplate, ModelTemplate.id == SubJob.model_template_id)
        .where(Trial.id.in_(trial_ids))
    ).all()
    # The members' processes serve the job's owner: confined to that user's folder, as trial workers are.
    private = settings.home / "workers" / f"owner-{owner_id}"
    protected = protected_paths(settings.home, settings.database_url, settings.artifacts_url)
    confinement = Confinement(protected, private=private).to_json()
    specs = {
        trial.id: MemberSpec(
            trial_id=trial.id,
            score=trial.score,
            model_name=template.name,
            structure=structure_key(knob_config_from_json(template.knob_config), trial.knobs),
            worker=InferenceSpec(
                trial_id=trial.id,
                artifacts_url=settings.artifacts_url,
                template_key=template.artifact_path,
                template_checksum=template.checksum,
                class_name=template.class_name,
                knobs=trial.knobs,
                params_key=trial.params_path or "",
                cache_dir=str(private / "cache"),
                confinement=confinement,
            ),
        )
        for trial, template in found
    }
    versions = []
    for version in row.versions:
        members = sorted((specs[member.trial_id] for member in version.members), key=_best_first)
        if not members:
            raise JobNotServableError(f"version {version.name!r} of inference job {job_id} has no members")
        versions.append(Version(version.name, version.weight, tuple(members)))
    return Revision(number, tuple(versions))


def _best_first(member: MemberSpec) -> tuple[bool, float, int]:
    """Best first: the order that breaks tied votes. Trials without a score go last."""
    return (member.score is None, -(member.score or 0.0), member.trial_id)


def _query_format(
    store: ArtifactStore, task: Task, key: str, dataset_format: DatasetFormat, target: str
) -> QueryFormat:
    """The query format, with the training set's columns or image size when they can be read."""
    try:
        if dataset_format is DatasetFormat.TABULAR:
            with store.open(key, "r") as f:
                header = next(csv.reader(f), [])
            names = tuple(column for column in header if column != target)
            if target in header and names:
                return QueryFormat(task, feature_names=names)
        else:
            return QueryFormat(task, image_shape=_first_image_shape(store, key))
    except (OSError, ValueError, csv.Error, zipfile.BadZipFile, KeyError, StopIteration) as e:
        logger.warning("cannot read the query format from the training set %s (%s); queries get fewer checks", key, e)
    return QueryFormat(task)


def _first_image_shape(store: ArtifactStore, key: str) -> tuple[int, ...]:
    from PIL import Image

    with store.open(key) as f, zipfile.ZipFile(f) as zf:
        rows = csv.reader(io.StringIO(zf.read(IMAGES_CSV).decode("utf-8-sig")))
        header = [column.strip() for column in next(rows)]
        first = next(row for row in rows if row)
        with Image.open(io.BytesIO(zf.read(first[header.index("path")].strip()))) as image:
            mode = "RGB" if image.mode in ("RGB", "P") else "L"
            width, height = image.size
    return (height, width, 3) if mode == "RGB" else (height, width)
