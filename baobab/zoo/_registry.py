"""The zoo in the metadata database: registering models, finding candidates, recording parents, retention.

Everything here works on an engine and an artifact store and never imports torch, so
the admin API (whose image has no torch) and a local worker share it.

Who sees what: a zoo model is visible to its owner and, when PUBLIC, to everyone.
Parents are chosen only among those (an admin's job too: a model's weights carry its
training data, so an admin sees every zoo model in the API but warm-starts only from
their own and PUBLIC ones). A trial's model belongs to its job's owner and is PRIVATE.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Engine, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from baobab.exceptions import ConflictError, NotFoundError, RequestError
from baobab.model import Task
from baobab.store import (
    ArtifactStore,
    ModelAccess,
    SubJob,
    TrainJob,
    Trial,
    ZooModel,
    params_from_bytes,
    session_scope,
    set_trial_parent,
)
from baobab.zoo._graph import ModelGraph
from baobab.zoo._matching import GraphFeatures, signature_features
from baobab.zoo._retention import DEFAULT_HALF_LIFE_DAYS, RetentionItem, choose_kept
from baobab.zoo._selection import Candidate, FeatureCache, Selection, SelectionPolicy, select_parent

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "STATE_PREFIX",
    "RegisteredModel",
    "choose_parent",
    "enforce_budget",
    "load_features",
    "load_graphs",
    "record_parent",
    "register_trial",
    "register_upload",
    "trial_job",
]

#: The zoo's storage budget unless told otherwise.
DEFAULT_BUDGET_BYTES = 20 * 2**30
#: TorchModel parameters keep the module's state under this prefix; zoo uploads do too.
STATE_PREFIX = "module."


@dataclass(frozen=True)
class RegisteredModel:
    """A zoo model as the API shows it (the graph only when asked for)."""

    id: int
    name: str
    owner_id: int
    access: str
    task: str
    trial_id: int | None
    dataset_id: int | None
    score: float
    fingerprint: str
    io_signature: str
    traced: bool
    node_count: int
    param_count: int
    size_bytes: int
    times_chosen: int
    last_chosen_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, row: ZooModel) -> RegisteredModel:
        return cls(
            id=row.id,
            name=row.name,
            owner_id=row.owner_id,
            access=row.access.value,
            task=row.task.value,
            trial_id=row.trial_id,
            dataset_id=row.dataset_id,
            score=row.score,
            fingerprint=row.fingerprint,
            io_signature=row.io_signature,
            traced=row.traced,
            node_count=row.node_count,
            param_count=row.param_count,
            size_bytes=row.size_bytes,
            times_chosen=row.times_chosen,
            last_chosen_at=row.last_chosen_at,
            created_at=row.created_at,
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _visible(owner_id: int) -> ColumnElement[bool]:
    return (ZooModel.owner_id == owner_id) | (ZooModel.access == ModelAccess.PUBLIC)


def _size_of(artifacts: ArtifactStore, key: str) -> int:
    with artifacts.open(key) as f:
        f.seek(0, 2)
        return int(f.tell())


def _row(
    graph: ModelGraph,
    *,
    owner_id: int,
    access: ModelAccess,
    task: Task,
    name: str,
    score: float,
    params_path: str,
    owns_params: bool,
    size_bytes: int,
    trial_id: int | None = None,
    dataset_id: int | None = None,
) -> ZooModel:
    return ZooModel(
        owner_id=owner_id,
        access=access,
        task=task,
        name=name[:255],
        trial_id=trial_id,
        dataset_id=dataset_id,
        score=score,
        graph=graph.dumps(),
        signature=graph.signature,
        fingerprint=graph.fingerprint,
        io_signature=graph.io_signature,
        traced=graph.traced,
        node_count=len(graph.nodes),
        param_count=graph.param_count,
        params_path=params_path,
        owns_params=owns_params,
        size_bytes=size_bytes,
        times_chosen=0,
    )


def trial_job(engine: Engine, trial_id: int) -> tuple[int, Task]:
    """The owner of the trial's job (whose zoo models the trial may start from) and its task.

    Raises:
        NotFoundError: there is no such trial.
    """
    with session_scope(engine) as session:
        found = session.execute(
            select(TrainJob.owner_id, TrainJob.task)
            .join(SubJob, SubJob.train_job_id == TrainJob.id)
            .join(Trial, Trial.sub_job_id == SubJob.id)
            .where(Trial.id == trial_id)
        ).first()
    if found is None:
        raise NotFoundError(f"no trial with id {trial_id}")
    return found[0], found[1]


def register_trial(
    engine: Engine, artifacts: ArtifactStore, trial_id: int, graph: ModelGraph, *, budget_bytes: int | None = None
) -> RegisteredModel:
    """Add a finished trial's model to the zoo (once: a second call returns the first registration).

    The score, parameters, task, dataset and owner are read from the trial and its
    job, never taken from the caller. Then the budget is enforced (see :func:`enforce_budget`).

    Raises:
        NotFoundError: there is no such trial.
        ConflictError: the trial is not COMPLETED or STOPPED with a finite score and
            parameters, or it ran under ``SKIP_TRAIN`` (an untrained model is no parent).
    """
    with session_scope(engine) as session:
        found = session.execute(
            select(Trial, TrainJob)
            .join(SubJob, Trial.sub_job_id == SubJob.id)
            .join(TrainJob, SubJob.train_job_id == TrainJob.id)
            .where(Trial.id == trial_id)
        ).first()
        if found is None:
            raise NotFoundError(f"no trial with id {trial_id}")
        trial, job = found
        existing = session.scalars(select(ZooModel).where(ZooModel.trial_id == trial_id)).first()
        if existing is not None:
            return RegisteredModel.of(existing)
        if not trial.status.is_scored() or trial.params_path is None:
            raise ConflictError(f"trial {trial_id} is {trial.status.value} without parameters; only trained ones join")
        if trial.score is None or not math.isfinite(trial.score):
            raise ConflictError(f"trial {trial_id} has no finite score")
        if (trial.policies or {}).get("SKIP_TRAIN") is True:
            raise ConflictError(f"trial {trial_id} ran under SKIP_TRAIN: an untrained model is no parent")
        row = _row(
            graph,
            owner_id=job.owner_id,
            access=ModelAccess.PRIVATE,
            task=job.task,
            name=f"{job.app} v{job.app_version} trial {trial.number}",
            score=float(trial.score),
            params_path=trial.params_path,
            owns_params=False,
            size_bytes=_size_of(artifacts, trial.params_path),
            trial_id=trial_id,
            dataset_id=job.train_dataset_id,
        )
        session.add(row)
        try:
            session.flush()
        except IntegrityError:  # registered by a concurrent call meanwhile
            session.rollback()
            existing = session.scalars(select(ZooModel).where(ZooModel.trial_id == trial_id)).first()
            if existing is None:
                raise
            return RegisteredModel.of(existing)
        registered = RegisteredModel.of(row)
    enforce_budget(engine, artifacts, budget_bytes)
    return registered


def register_upload(
    engine: Engine,
    artifacts: ArtifactStore,
    *,
    owner_id: int,
    graph: ModelGraph,
    params: bytes,
    score: float,
    task: Task,
    name: str,
    access: ModelAccess = ModelAccess.PRIVATE,
    budget_bytes: int | None = None,
) -> RegisteredModel:
    """Add a model trained outside a job: its parameters are stored in the zoo (``zoo/<uuid>.safetensors``).

    Raises:
        RequestError: ``params`` are not parameters, miss a tensor the graph names, or
            ``score`` is not finite (the field is named).
    """
    if not math.isfinite(score):
        raise RequestError(f"'score' must be a finite number, got {score!r}", field="score")
    try:
        decoded = params_from_bytes(params)
    except ValueError as e:
        raise RequestError(f"not a parameters file: {e}", field="file") from None
    for node in graph.nodes:
        for local, key in node.state.items():
            value = decoded.get(STATE_PREFIX + key)
            if not hasattr(value, "shape"):
                raise RequestError(
                    f"the parameters lack the tensor {STATE_PREFIX + key!r}, which the graph's node {node.name!r} owns",
                    field="file",
                )
            expected = {"weight": node.weight, "bias": node.bias}.get(local)
            if expected is not None and tuple(value.shape) != expected:
                raise RequestError(
                    f"{STATE_PREFIX + key!r} has shape {tuple(value.shape)} but the graph says {expected}",
                    field="file",
                )
    key = f"zoo/{uuid.uuid4().hex}.safetensors"
    artifacts.put_bytes(key, params)
    try:
        with session_scope(engine) as session:
            row = _row(
                graph,
                owner_id=owner_id,
                access=access,
                task=task,
                name=name,
                score=float(score),
                params_path=key,
                owns_params=True,
                size_bytes=len(params),
            )
            session.add(row)
            session.flush()
            registered = RegisteredModel.of(row)
    except BaseException:
        artifacts.delete(key)
        raise
    enforce_budget(engine, artifacts, budget_bytes)
    return registered


def load_graphs(engine: Engine, ids: Iterable[int]) -> dict[int, ModelGraph]:
    """The graphs of these zoo models (those that still exist)."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    with session_scope(engine) as session:
        rows = session.execute(select(ZooModel.id, ZooModel.graph).where(ZooModel.id.in_(wanted))).all()
    return {zoo_id: ModelGraph.loads(text, trusted=True) for zoo_id, text in rows}  # checked when registered


def load_features(engine: Engine, ids: Iterable[int]) -> dict[int, GraphFeatures]:
    """The matching features of these zoo models, from their signatures (not their whole graphs)."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    with session_scope(engine) as session:
        rows = session.execute(select(ZooModel.id, ZooModel.signature).where(ZooModel.id.in_(wanted))).all()
    return {zoo_id: signature_features(json.loads(text)) for zoo_id, text in rows}


def choose_parent(
    engine: Engine,
    graph: ModelGraph,
    *,
    task: Task,
    owner_id: int,
    policy: SelectionPolicy | None = None,
    cache: FeatureCache | None = None,
) -> Selection:
    """The parent for a model of ``graph`` owned by ``owner_id``, among the zoo models they may see.

    Candidates: same task and input and output shapes, traced, visible to the owner
    (see the module docstring); the rest is :func:`~baobab.zoo.select_parent`.
    """
    with session_scope(engine) as session:
        rows = session.execute(
            select(ZooModel.id, ZooModel.score, ZooModel.fingerprint).where(
                ZooModel.task == task,
                ZooModel.io_signature == graph.io_signature,
                ZooModel.traced.is_(True),
                _visible(owner_id),
            )
        ).all()
    candidates = [Candidate(zoo_id, score, fingerprint) for zoo_id, score, fingerprint in rows]
    return select_parent(
        graph,
        candidates,
        lambda ids: load_graphs(engine, ids),
        load_features=lambda ids: load_features(engine, ids),
        policy=policy,
        cache=cache,
    )


def record_parent(engine: Engine, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
    """Note that a model was warm-started from ``zoo_model_id``: on the trial's row, and in the parent's value.

    Raises:
        NotFoundError: the zoo model (or the trial) does not exist.
        RequestError: ``similarity`` is not in [0, 1].
    """
    if not 0 <= similarity <= 1:
        raise RequestError(f"'similarity' must lie in [0, 1], got {similarity!r}", field="similarity")
    now = _now()
    with session_scope(engine) as session:
        changed = session.execute(
            update(ZooModel)
            .where(ZooModel.id == zoo_model_id)
            .values(times_chosen=ZooModel.times_chosen + 1, last_chosen_at=now)
        ).rowcount
        if changed != 1:
            raise NotFoundError(f"no zoo model with id {zoo_model_id}")
        if trial_id is not None and not set_trial_parent(session, trial_id, zoo_model_id, similarity):
            raise NotFoundError(f"no trial with id {trial_id}")


def enforce_budget(
    engine: Engine,
    artifacts: ArtifactStore,
    budget_bytes: int | None = None,
    *,
    now: datetime | None = None,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> list[int]:
    """Evict zoo models until the zoo fits ``budget_bytes``, keeping the most valuable set.

    See :mod:`baobab.zoo._retention` for the value. An evicted model's row goes; its
    parameters go too when the zoo stored them (uploads), never a trial's own.

    Returns:
        The ids evicted, in no order.
    """
    budget = DEFAULT_BUDGET_BYTES if budget_bytes is None else budget_bytes
    with session_scope(engine) as session:
        if (session.scalar(select(func.coalesce(func.sum(ZooModel.size_bytes), 0))) or 0) <= budget:
            return []
        rows = session.execute(
            select(ZooModel.id, ZooModel.size_bytes, ZooModel.created_at, ZooModel.times_chosen)
        ).all()
    items = [RetentionItem(*row) for row in rows]
    kept = choose_kept(items, budget, now or _now(), half_life_days=half_life_days)
    evicted = [item.id for item in items if item.id not in kept]
    if not evicted:
        return []
    with session_scope(engine) as session:
        owned = session.scalars(
            select(ZooModel.params_path).where(ZooModel.id.in_(evicted), ZooModel.owns_params.is_(True))
        ).all()
        session.execute(delete(ZooModel).where(ZooModel.id.in_(evicted)))
    for key in owned:
        artifacts.delete(key)
    return evicted
