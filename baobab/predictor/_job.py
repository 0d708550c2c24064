"""What a predictor serves, read once from the store when it starts.

The predictor reads the metadata database only here: the job, its members (best
first) and how a query of the job looks (from the header of the training CSV or the
first training image). After that it needs neither the database nor the datasets.
"""

from __future__ import annotations

import csv
import io
import logging
import zipfile
from dataclasses import dataclass

from sqlalchemy import select

from baobab import Settings
from baobab._sandbox import Confinement, protected_paths
from baobab.exceptions import BaobabError
from baobab.model import DatasetFormat, Task, knob_config_from_json, structure_key
from baobab.predictor._queries import QueryFormat
from baobab.store import (
    IMAGES_CSV,
    ArtifactStore,
    InferenceJob,
    InferenceMember,
    ModelTemplate,
    SubJob,
    Trial,
    create_engine_from_url,
    session_scope,
)
from baobab.worker import InferenceSpec

__all__ = ["MemberSpec", "PredictorJob", "load_job"]

logger = logging.getLogger("baobab.predictor")


class JobNotServableError(BaobabError):
    """The inference job is missing, finished, or has no members."""


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
class PredictorJob:
    """An inference job as the predictor serves it; ``members`` best first.

    ``request_log_rate`` is the share of answered requests it logs (0: none).
    """

    id: int
    task: Task
    public: bool
    api_key_hash: str | None
    members: tuple[MemberSpec, ...]
    query_format: QueryFormat
    request_log_rate: float = 0.0


def load_job(settings: Settings, job_id: int) -> PredictorJob:
    """Read inference job ``job_id`` and everything its predictor needs.

    Raises:
        JobNotServableError: no such job, the job is STOPPED or ERRORED, or it has no members.
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
            rows = session.execute(
                select(Trial, ModelTemplate)
                .join(InferenceMember, InferenceMember.trial_id == Trial.id)
                .join(SubJob, SubJob.id == Trial.sub_job_id)
                .join(ModelTemplate, ModelTemplate.id == SubJob.model_template_id)
                .where(InferenceMember.inference_job_id == job_id)
            ).all()
            dataset = train_job.train_dataset
            task, train_args = train_job.task, dict(train_job.train_args or {})
            public, api_key_hash, owner = job.public, job.api_key_hash, job.owner_id
            request_log_rate = job.request_log_rate
            dataset_key, dataset_format = dataset.artifact_path, dataset.format
    finally:
        engine.dispose()
    if not rows:
        raise JobNotServableError(f"inference job {job_id} has no members")
    # The members' processes serve the job's owner: confined to that user's folder, as trial workers are.
    private = settings.home / "workers" / f"owner-{owner}"
    protected = protected_paths(settings.home, settings.database_url, settings.artifacts_url)
    confinement = Confinement(protected, private=private).to_json()
    members = [
        MemberSpec(
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
        for trial, template in rows
    ]
    # Best first: the order that breaks tied votes. Trials without a score go last.
    members.sort(key=lambda m: (m.score is None, -(m.score or 0.0), m.trial_id))
    target = train_args.get("target", "target")
    query_format = _query_format(store, task, dataset_key, dataset_format, target if isinstance(target, str) else "")
    return PredictorJob(job_id, task, public, api_key_hash, tuple(members), query_format, request_log_rate)


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
