"""Running one trial in this process, from its id: the worker side of a trial.

:func:`run_trial` does what the platform contract (``.notes/PLATFORM.md``) asks of
whoever runs a trial, in three or four short transactions:

1. claim: ``PENDING → RUNNING`` (``started_at``, ``worker``, ``attempts + 1``) by a
   conditional update, and read what the trial needs (its sub-job's seed, template,
   datasets and train args) in the same transaction. A trial that is no longer
   PENDING (cancelled, or claimed by someone else) is not run.
2. train: the template class (imported once per process per checksum) is built with
   the trial's knobs and trained inside a :class:`~baobab.model.TrialContext` whose
   sink stores interim metrics and log lines as they come; what the template prints
   becomes log lines too. ``evaluate()`` must return a finite number.
3. the parameters go to the artifact store as ``params/trial-<id>.safetensors``.
4. the final state, by a conditional update (only while RUNNING, so a trial cancelled
   meanwhile stays CANCELLED): COMPLETED, STOPPED (asked to stop, still evaluated: its
   score counts) or ERRORED (``error`` a one-line reason, ``traceback`` the template's).

The trial's steps (seeding, calls into the template, score and parameter checks) are
the dev runner's (:mod:`baobab.model._trial_process`), so a template behaves the same
under ``baobab dev test-model`` and on the platform.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import BindParameter, Engine, bindparam, insert, select, update
from sqlalchemy.orm import Session

from baobab.exceptions import ArtifactError, KnobConfigError
from baobab.model import BaseModel, TrialContext, knobs_from_json, trial_context, validate_knobs
from baobab.model._trial_process import (
    TrialFailed,
    call_template,
    check_score,
    params_bytes,
    seed_globals,
    train_kwargs,
    trial_seed,
)
from baobab.store import (
    ArtifactStore,
    Dataset,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialLog,
    TrialState,
    create_engine_from_url,
    session_scope,
)
from baobab.worker._cache import ArtifactCache, LoadedTemplate, TemplateCache
from baobab.worker._capture import capture_prints
from baobab.worker._recorder import RowWriter, TrialSink

if TYPE_CHECKING:
    from baobab import Settings

__all__ = ["TrialOutcome", "WorkerResources", "params_key", "run_trial"]

logger = logging.getLogger("baobab.worker")


def params_key(trial_id: int) -> str:
    """The artifact key of a trial's parameters."""
    return f"params/trial-{trial_id}.safetensors"


@dataclass(frozen=True)
class TrialOutcome:
    """How :func:`run_trial` left a trial.

    ``ran`` is False when the trial was not run: it was not PENDING (``status`` says what
    it was), or it does not exist (``status`` None). ``score`` is set for COMPLETED and
    STOPPED, ``error`` (one line) for ERRORED.
    """

    trial_id: int
    status: TrialState | None
    ran: bool
    score: float | None = None
    error: str | None = None


class WorkerResources:
    """What a worker process keeps across trials: its database engine, artifact store and caches.

    One trial at a time uses it (a worker runs trials one after the other); the caches
    make the second trial of a template or dataset cheap.

    Args:
        engine: the metadata database.
        artifacts: the artifact store.
        cache_dir: where remote artifacts are downloaded (``settings.home / "cache"``).
        name: how the worker appears in ``Trial.worker``.
    """

    def __init__(self, *, engine: Engine, artifacts: ArtifactStore, cache_dir: Path, name: str) -> None:
        self.engine = engine
        self.artifacts = artifacts
        self.name = name
        self.files = ArtifactCache(artifacts, cache_dir)
        self.templates = TemplateCache(self.files)
        self.writer = RowWriter(engine)
        self._owns_engine = False

    @classmethod
    def from_settings(
        cls, settings: Settings, *, name: str | None = None, engine: Engine | None = None
    ) -> WorkerResources:
        """Resources on ``settings.database_url`` and ``settings.artifacts_url``, caching under ``settings.home``.

        Args:
            name: the worker's name; by default ``<host>:<pid>``.
            engine: an engine to share; by default one is created (and disposed by :meth:`close`).
        """
        own = engine is None
        resources = cls(
            engine=create_engine_from_url(settings.database_url) if engine is None else engine,
            artifacts=ArtifactStore(settings.artifacts_url),
            cache_dir=settings.home / "cache",
            name=name or f"{socket.gethostname()}:{os.getpid()}",
        )
        resources._owns_engine = own
        return resources

    def close(self) -> None:
        """Wait for pending log rows, and dispose of the engine if these resources created it."""
        self.writer.flush()
        if self._owns_engine:
            self.engine.dispose()


@dataclass(frozen=True)
class _Claim:
    """A trial just set RUNNING, and what running it needs."""

    trial_id: int
    number: int
    knobs: dict[str, Any]
    seed: int
    template_key: str
    template_checksum: str
    class_name: str
    train_args: dict[str, Any]
    train_key: str
    train_checksum: str
    val_key: str
    val_checksum: str


# Core statements, built once: each trial pays only for executing them.
_trials = Trial.__table__
_datasets = Dataset.__table__
_train_set = _datasets.alias("train_set")
_val_set = _datasets.alias("val_set")


def _param(name: str, column: str) -> BindParameter[Any]:
    return bindparam(name, type_=_trials.c[column].type)


_CLAIM = (
    update(_trials)
    .where(_trials.c.id == bindparam("b_id"), _trials.c.status == TrialState.PENDING)
    .values(
        status=TrialState.RUNNING,
        started_at=_param("b_now", "started_at"),
        heartbeat_at=_param("b_now", "heartbeat_at"),
        worker=_param("b_worker", "worker"),
        attempts=_trials.c.attempts + 1,
    )
    .returning(_trials.c.number, _trials.c.knobs, _trials.c.sub_job_id)
)
_sub_jobs = SubJob.__table__
_templates = ModelTemplate.__table__
_jobs = TrainJob.__table__
_INPUTS = (
    select(
        _sub_jobs.c.seed,
        _templates.c.artifact_path,
        _templates.c.checksum,
        _templates.c.class_name,
        _jobs.c.train_args,
        _train_set.c.artifact_path,
        _train_set.c.checksum,
        _val_set.c.artifact_path,
        _val_set.c.checksum,
    )
    .select_from(
        _sub_jobs.join(_templates, _sub_jobs.c.model_template_id == _templates.c.id)
        .join(_jobs, _sub_jobs.c.train_job_id == _jobs.c.id)
        .join(_train_set, _jobs.c.train_dataset_id == _train_set.c.id)
        .join(_val_set, _jobs.c.val_dataset_id == _val_set.c.id)
    )
    .where(_sub_jobs.c.id == bindparam("b_sub_job"))
)
_FINISH = (
    update(_trials)
    .where(_trials.c.id == bindparam("b_id"), _trials.c.status == TrialState.RUNNING)
    .values(
        status=_param("b_status", "status"),
        finished_at=_param("b_now", "finished_at"),
        score=_param("b_score", "score"),
        params_path=_param("b_params", "params_path"),
        error=_param("b_error", "error"),
        traceback=_param("b_traceback", "traceback"),
    )
)
_STATUS = select(_trials.c.status).where(_trials.c.id == bindparam("b_id"))
_LOG = insert(TrialLog.__table__)


def _now() -> datetime:
    return datetime.now(UTC)


def _status(session: Session, trial_id: int) -> TrialState | None:
    return session.execute(_STATUS, {"b_id": trial_id}).scalar()


def _claim(resources: WorkerResources, trial_id: int) -> _Claim | TrialOutcome:
    with session_scope(resources.engine) as session:
        row = session.execute(_CLAIM, {"b_id": trial_id, "b_now": _now(), "b_worker": resources.name}).first()
        if row is None:
            return TrialOutcome(trial_id, _status(session, trial_id), ran=False)
        number, knobs, sub_job_id = row
        inputs = session.execute(_INPUTS, {"b_sub_job": sub_job_id}).first()
    if inputs is None:  # the job was deleted meanwhile, and the trial with it
        return TrialOutcome(trial_id, None, ran=False)
    seed, template_key, template_checksum, class_name, train_args, train_key, train_sum, val_key, val_sum = inputs
    return _Claim(
        trial_id=trial_id,
        number=number,
        knobs=knobs_from_json(knobs) if isinstance(knobs, str) else dict(knobs),
        seed=seed,
        template_key=template_key,
        template_checksum=template_checksum,
        class_name=class_name,
        train_args=dict(train_args or {}),
        train_key=train_key,
        train_checksum=train_sum,
        val_key=val_key,
        val_checksum=val_sum,
    )


def _finish(
    resources: WorkerResources,
    trial_id: int,
    status: TrialState,
    *,
    score: float | None = None,
    params_path: str | None = None,
    error: str | None = None,
    traceback: str | None = None,
    log_line: str | None = None,
) -> TrialState | None:
    """Store the final state if the trial is still RUNNING; returns the state it has now."""
    now = _now()
    values = {
        "b_id": trial_id,
        "b_status": status,
        "b_now": now,
        "b_score": score,
        "b_params": params_path,
        "b_error": error,
        "b_traceback": traceback,
    }
    with session_scope(resources.engine) as session:
        if session.execute(_FINISH, values).rowcount != 1:
            return _status(session, trial_id)
        if log_line is not None:
            session.execute(_LOG, [{"trial_id": trial_id, "line": log_line, "time": now}])
    return status


def _local_file(resources: WorkerResources, what: str, key: str, checksum: str) -> str:
    try:
        return str(resources.files.path(key, checksum))
    except ArtifactError as e:
        raise TrialFailed(f"cannot fetch the {what}: {e}") from None


def _knobs(claim: _Claim, template: LoadedTemplate) -> dict[str, Any]:
    try:
        return validate_knobs(template.config, claim.knobs)
    except KnobConfigError as e:
        raise TrialFailed(f"the trial's knobs do not fit the template's knob config: {e}") from None


def _teardown(path: Path, model: BaseModel, context: TrialContext, *, failing: bool) -> None:
    try:
        call_template(path, "teardown()", model.teardown)
    except TrialFailed as e:
        if not failing:
            raise
        context.log(f"teardown() also failed: {e.error}")  # the first error is the one reported


def _train(claim: _Claim, resources: WorkerResources, context: TrialContext) -> tuple[float, bytes, str | None]:
    """Build, train, evaluate and dump: (score, parameters, stop reason)."""
    with capture_prints(context.log), trial_context(context):
        template = resources.templates.get(claim.template_key, claim.template_checksum, claim.class_name)
        train_path = _local_file(resources, "training dataset", claim.train_key, claim.train_checksum)
        val_path = _local_file(resources, "validation dataset", claim.val_key, claim.val_checksum)
        knobs = _knobs(claim, template)
        seed = trial_seed(claim.seed, claim.number)
        seed_globals(seed)
        path = template.path
        model = call_template(path, f"{claim.class_name}(**knobs)", template.cls, **knobs)
        try:
            train_args = train_kwargs(template.cls, claim.train_args, seed)
            call_template(path, "train()", model.train, train_path, **train_args)
            score = check_score(call_template(path, "evaluate()", model.evaluate, val_path))
            stop_reason = context.stop_reason
            data = params_bytes(path, model)
        except BaseException:
            _teardown(path, model, context, failing=True)
            raise
        _teardown(path, model, context, failing=False)
    return score, data, stop_reason


def _errored(resources: WorkerResources, claim: _Claim, error: str, details: str) -> TrialOutcome:
    resources.writer.flush()
    status = _finish(resources, claim.trial_id, TrialState.ERRORED, error=error, traceback=details or None)
    gc.collect()  # what a failed template left in reference cycles (a MemoryError's arrays) goes now
    return TrialOutcome(claim.trial_id, status, ran=True, error=error)


def _succeeded(
    resources: WorkerResources, claim: _Claim, score: float, data: bytes, stop_reason: str | None
) -> TrialOutcome:
    key = params_key(claim.trial_id)
    try:
        resources.artifacts.put_bytes(key, data)
    except (ArtifactError, OSError) as e:
        logger.exception("trial %d: cannot store its parameters", claim.trial_id)
        return _errored(resources, claim, f"cannot store the parameters in {resources.artifacts.url}: {e}", "")
    resources.writer.flush()
    if stop_reason is None:
        status = _finish(resources, claim.trial_id, TrialState.COMPLETED, score=score, params_path=key)
    else:
        line = f"stopped early: {stop_reason}"
        status = _finish(resources, claim.trial_id, TrialState.STOPPED, score=score, params_path=key, log_line=line)
    if status not in (TrialState.COMPLETED, TrialState.STOPPED):  # cancelled meanwhile: keep no orphan
        resources.artifacts.delete(key)
        return TrialOutcome(claim.trial_id, status, ran=True)
    return TrialOutcome(claim.trial_id, status, ran=True, score=score)


def run_trial(trial_id: int, resources: WorkerResources, *, context: TrialContext | None = None) -> TrialOutcome:
    """Run the PENDING trial ``trial_id`` here and store its outcome (see the module docstring).

    Args:
        trial_id: the trial's row id.
        resources: the engine, artifact store and caches of this worker.
        context: the trial's context, for callers that must reach it while the trial
            runs: :meth:`~baobab.model.TrialContext.request_stop` may be called from
            another thread, before or during the run (a stop requested before the run
            starts makes the template train briefly, if it checks ``should_stop``). Its
            sink is replaced by the one that stores metrics and logs.

    Returns:
        The outcome; a template's failure is an ERRORED outcome, never an exception.

    Raises:
        StoreError: the metadata database failed (the trial may be left RUNNING).
    """
    claim = _claim(resources, trial_id)
    if isinstance(claim, TrialOutcome):
        logger.info("trial %d not run: it is %s", trial_id, claim.status or "gone")
        return claim
    context = TrialContext() if context is None else context
    context.sink = TrialSink(resources.writer, trial_id)
    started = time.perf_counter()
    try:
        score, data, stop_reason = _train(claim, resources, context)
    except TrialFailed as e:
        outcome = _errored(resources, claim, e.error, e.details)
    except Exception as e:
        # Not the template's fault (its errors are TrialFailed): a bug here, or the
        # artifact store failing. The trial still ends, with the whole traceback.
        logger.exception("trial %d: the worker failed", trial_id)
        summary = f"the worker failed: {type(e).__name__}: {e}".splitlines()[0]
        outcome = _errored(resources, claim, summary, traceback.format_exc())
    else:
        outcome = _succeeded(resources, claim, score, data, stop_reason)
    logger.info("trial %d %s in %.3f s", trial_id, outcome.status, time.perf_counter() - started)
    return outcome
