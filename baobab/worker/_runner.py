"""Running one trial in this process, from its id: the worker side of a trial.

:func:`run_trial` does what the platform contract asks of whoever runs a trial, through
a :class:`~baobab.worker._gateway.TrialGateway` (the admin API with the trial's token;
the rules are :mod:`baobab.store._db._trial_rows`'):

1. claim: ``PENDING → RUNNING`` and read what the trial needs (its sub-job's seed,
   template, datasets and train args). A trial that cannot be claimed (finished,
   cancelled, or running on a live worker) is not run.
2. train: the template class (imported once per process per checksum) is built with
   the trial's knobs and trained inside a :class:`~baobab.model.TrialContext` whose
   sink stores interim metrics and log lines as they come; what the template prints
   becomes log lines too. ``evaluate()`` must return a finite number. Where the gateway
   asks for heartbeats, a thread beats while the trial runs and passes on stop requests.
   With a data cache (``WorkerResources(data_cache_mb=...)``) the context's ``data_loader``
   maps a TorchModel's datasets from it: decoded and preprocessed once per machine. A
   claim that asks for a fusion profile (job option ``fusion: "auto"``) is first
   measured on a second instance (:mod:`baobab.worker._fusion_profile`).
3. the parameters go to the artifact store as ``params/trial-<id>.safetensors``; until
   one trial of the sub-job has a score (``claim.check_reload``), they are first reloaded
   into a fresh instance, which must predict the same on a few validation examples: a
   template whose parameters miss part of its state fails here, not when served.
4. the final state, only while this claim is current (so a trial cancelled or taken
   over meanwhile keeps what others stored), with the interim metrics and log lines not
   sent yet, in one request that a cluster worker also claims its next trial with
   (:class:`~baobab.worker.FinishRelay`): COMPLETED, STOPPED (asked to stop, still
   evaluated: its score counts), each with the parameters' key and, for a
   :class:`~baobab.space.SpaceModel`, the mutation record of the instance it trained
   (what the web UI draws), ERRORED (``error`` a one-line reason, ``traceback``
   the template's) or INVALID, the same way, when the template raised
   :class:`~baobab.exceptions.InvalidArchitectureError`.
   Every final state carries the trial's ``time_breakdown``: the seconds it spent in each
   :class:`~baobab.enums.TimePhase` up to then (see :func:`_timed` for how a fused group's
   shared work is split between its members).

The trial's steps (seeding, calls into the template, score and parameter checks) are
the dev runner's (:mod:`baobab.worker._trial_process`), so a template behaves the same
under ``baobab dev test-model`` and on the platform.

:func:`run_trials` runs a fused group (a unit of work of several trials of one sub-job,
see :meth:`baobab.advisor.Executor.submit`) the same way, member by member, except step
2: the members of a TorchModel template train as one stacked computation
(:func:`baobab.model.train_fused`), each in its own context. A member whose loss stops
being finite ends ERRORED with that reason while the others train on; a stop request
reaches its member only.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baobab._contained import become_subreaper, children_of, end_strays
from baobab.enums import Task
from baobab.exceptions import ArtifactError, KnobConfigError, StoreError
from baobab.model import (
    BaseModel,
    InterimMetric,
    Params,
    TrialContext,
    get_trial_context,
    knobs_from_json,
    template_traceback,
    trial_context,
    validate_knobs,
)
from baobab.store import (
    ClaimRefused,
    ParamsFormatError,
    TrialClaim,
    TrialState,
    params_from_bytes,
    params_key,
)
from baobab.worker._cache import ArtifactCache, LoadedTemplate, TemplateCache
from baobab.worker._capture import capture_prints
from baobab.worker._data_cache import DataCache
from baobab.worker._fusion_profile import measure_fusion, profile_line
from baobab.worker._gateway import TrialGateway
from baobab.worker._gpu_memory import gpu_memory, reset_gpu_peak
from baobab.worker._queries import sample_queries
from baobab.worker._recorder import RowWriter, TrialSink
from baobab.worker._telemetry import Phase
from baobab.worker._trial_process import (
    TrialFailed,
    call_template,
    check_reload,
    check_score,
    params_bytes,
    seed_globals,
    train_kwargs,
    trial_seed,
)

__all__ = ["TrialOutcome", "WorkerResources", "run_trial", "run_trials"]

logger = logging.getLogger("baobab.worker")

#: Validation examples the reload check predicts.
_RELOAD_QUERIES = 8


@dataclass(frozen=True)
class _Trained:
    """What training left to store: the score, the parameters, why it stopped early (None: it did
    not), what to add to the zoo (the zoo and the model's graph, or None) and the SpaceModel's record."""

    score: float
    params: bytes
    stop_reason: str | None
    zoo_entry: tuple[Any, Any] | None
    architecture: dict[str, Any] | None


@dataclass(frozen=True)
class TrialOutcome:
    """How :func:`run_trial` left a trial.

    ``ran`` is False when the trial was not run: it could not be claimed (``status`` says
    what it is; None: it does not exist; ``retry_after_s`` set: it runs on a live worker,
    ask again after that long). ``score`` is set for COMPLETED and STOPPED, ``error``
    (one line) for ERRORED and INVALID. ``phases``: the seconds the trial spent in each
    :class:`~baobab.worker._telemetry.Phase` it reached (its value is the key). A trial whose
    final state goes with the worker's next claim (a cluster worker's) has the state it is
    sent with: it is stored a moment later, or, if another claim took the trial meanwhile,
    not at all.
    """

    trial_id: int
    status: TrialState | None
    ran: bool
    score: float | None = None
    error: str | None = None
    retry_after_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict, compare=False)


class WorkerResources:
    """What a worker process keeps across trials: its file cache, imported templates and name.

    One trial at a time uses it (a worker runs trials one after the other); the caches
    make the second trial of a template or dataset cheap.

    Args:
        cache_dir: where artifacts that are not local files are downloaded.
        name: how the worker appears in ``Trial.worker``.
        data_cache_mb: the budget of the preprocessed datasets that the worker processes
            sharing ``cache_dir`` share (in ``cache_dir / "data"``, see
            :mod:`baobab.worker._data_cache`); 0: each trial decodes its own.
    """

    def __init__(self, *, cache_dir: Path, name: str | None = None, data_cache_mb: int = 0) -> None:
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.files = ArtifactCache(cache_dir)
        self.templates = TemplateCache(self.files)
        self.data = DataCache(cache_dir / "data", budget_mb=data_cache_mb) if data_cache_mb else None
        #: The parameters the last unit of work here produced (artifact key → safetensors bytes; each
        #: member of a fused group leaves its own): a SHARE_PARAMS trial that starts from them skips
        #: reading them back.
        self.produced: dict[str, bytes] = {}
        #: Shared parameters read for the unit of work that runs (artifact key → parameters): the
        #: members of a fused group start from the same ones, read and decoded once for them all.
        self.shared: dict[str, Params] = {}
        self._new_unit = True

    def start_unit(self) -> None:
        """A unit of work starts: it reads shared parameters afresh, and keeps the last unit's
        products until it produces its own (its trials are built, and read theirs, before)."""
        self.shared = {}
        self._new_unit = True

    def keep_produced(self, key: str, params: bytes) -> None:
        if self._new_unit:
            self.produced, self._new_unit = {}, False
        self.produced[key] = params


class _Trial:
    """One claimed trial on its way to a final state: its context, the writer of its records, its heartbeat."""

    def __init__(
        self,
        claim: TrialClaim,
        resources: WorkerResources,
        gateway: TrialGateway,
        context: TrialContext,
        *,
        time_limit_s: float | None,
        on_overrun: Callable[[], None] | None,
        alone: bool = True,
    ) -> None:
        self.claim = claim
        #: The trial is its unit of work alone: its final state may wait for the worker's next claim
        #: (:meth:`TrialGateway.finish_soon`); a fused group's members store theirs one by one, now.
        self.alone = alone
        self.resources = resources
        self.gateway = gateway
        self.context = context
        self.writer = RowWriter(gateway.records)
        context.sink = TrialSink(self.writer, claim.trial_id)
        #: What the trial measured of fusion when its claim asked (stored with its final state).
        self.profile: dict[str, Any] | None = None
        #: Seconds spent in each phase so far (see :func:`_timed`).
        self.phases: dict[str, float] = {}
        reset_gpu_peak()
        self.heartbeat: _Heartbeat | None = None
        if gateway.heartbeat_s is not None:
            self.heartbeat = _Heartbeat(
                gateway,
                claim,
                context,
                interval_s=gateway.heartbeat_s,
                time_limit_s=time_limit_s,
                grace_s=max(5.0, 2 * gateway.heartbeat_s),
                on_overrun=on_overrun,
            )

    def failed(self, error: str, details: str, state: TrialState = TrialState.ERRORED) -> TrialOutcome:
        """End the trial unscored: ERRORED, or INVALID (its architecture cannot be built)."""
        fields = {"error": error, "traceback": details or None, **self._measured(), **self._unsent()}
        fields["time_breakdown"] = dict(self.phases)
        with _timed([self], Phase.STORE):
            status = self._finish(state, fields, lambda _: None)
        gc.collect()  # what a failed template left in reference cycles (a MemoryError's arrays) goes now
        return TrialOutcome(self.claim.trial_id, status, ran=True, error=error, phases=self.phases)

    def _unsent(self) -> dict[str, Any]:
        """The interim metrics and log lines not stored yet, which the final state carries."""
        metrics, logs = self.writer.take_rest()
        return {"metrics": metrics, "logs": logs}

    def _finish(
        self, state: TrialState, fields: dict[str, Any], on_stored: Callable[[TrialState | None], None]
    ) -> TrialState | None:
        """Store the final ``state``, now or, when the trial is its unit alone, with the worker's next claim;
        the state the trial has now, or the one it is sent with while it waits. ``on_stored`` hears what was
        stored."""
        if self.alone:
            stored: list[TrialState | None] = []

            def heard(status: TrialState | None) -> None:
                stored.append(status)
                on_stored(status)

            self.gateway.finish_soon(self.claim, state, heard, **fields)
            return stored[0] if stored else state
        status = self.gateway.finish(self.claim, state, **fields)
        on_stored(status)
        return status

    def _measured(self) -> dict[str, Any]:
        measured: dict[str, Any] = {} if self.profile is None else {"fusion_profile": self.profile}
        memory = gpu_memory()
        if memory is not None:
            measured["gpu_memory"] = memory
        return measured

    def ended_by(self, error: Exception) -> TrialOutcome:
        """End the trial for ``error``: the template's (a :class:`TrialFailed`), or the worker's own."""
        if isinstance(error, TrialFailed):
            return self.failed(error.error, error.details, TrialState.INVALID if error.invalid else TrialState.ERRORED)
        # Not the template's fault (its errors are TrialFailed): a bug here, or the
        # artifact store failing. The trial still ends, with the whole traceback.
        logger.error("trial %d: the worker failed", self.claim.trial_id, exc_info=error)
        summary = f"the worker failed: {type(error).__name__}: {error}".splitlines()[0]
        return self.failed(summary, "".join(traceback.format_exception(error)))

    def settle(self, work: Callable[[], _Trained]) -> TrialOutcome:
        """Run ``work`` (training's end) and store what it gives, or how it failed."""
        try:
            trained = work()
        except Exception as e:
            return self.ended_by(e)
        return self.succeeded(trained)

    def succeeded(self, trained: _Trained) -> TrialOutcome:
        trial_id = self.claim.trial_id
        key = params_key(trial_id)
        artifacts = self.gateway.artifacts
        try:
            with _timed([self], Phase.STORE):
                artifacts.put_bytes(key, trained.params)
        except (ArtifactError, OSError) as e:
            logger.exception("trial %d: cannot store its parameters", trial_id)
            return self.failed(f"cannot store the parameters in {artifacts.url}: {e}", "")
        with _timed([self], Phase.STORE):
            status = self._store(trained, key)
        score = trained.score if status is not None and status.is_scored() else None
        return TrialOutcome(trial_id, status, ran=True, score=score, phases=self.phases)

    def _store(self, trained: _Trained, key: str) -> TrialState | None:
        """The final state, with the parameters at ``key`` (deleted again when the trial is no longer ours).

        Its parameters stay in memory for a SHARE_PARAMS trial that follows, and go if the trial
        turns out not to be its own. A trial that adds to the zoo stores its state now (the zoo
        reads score, parameters and owner from the row); another may send it with the next claim.
        """
        fields = {"score": trained.score, "params_path": key, "architecture": trained.architecture}
        fields.update(self._measured(), **self._unsent(), time_breakdown=dict(self.phases))
        state = TrialState.COMPLETED
        if trained.stop_reason is not None:
            state = TrialState.STOPPED
            fields["log_line"] = f"stopped early: {trained.stop_reason}"
        self.resources.keep_produced(key, trained.params)
        if trained.zoo_entry is None:
            return self._finish(state, fields, functools.partial(self._keep, key))
        status = self.gateway.finish(self.claim, state, **fields)
        if self._keep(key, status):
            from baobab.zoo import register_trial_model

            register_trial_model(trained.zoo_entry[0], self.claim.trial_id, trained.zoo_entry[1])
        return status

    def _keep(self, key: str, status: TrialState | None) -> bool:
        """Whether the trial's stored state is its own, scored; if not (cancelled or taken over), its
        parameters at ``key`` go, from the artifact store and from memory: no orphan is kept."""
        if status is not None and status.is_scored():
            return True
        self.gateway.artifacts.delete(key)
        self.resources.produced.pop(key, None)
        return False


class _GroupLog:
    """Where a fused group's prints go outside any one member's calls: into every member's log."""

    def __init__(self, contexts: Sequence[TrialContext]) -> None:
        self._contexts = contexts

    def on_report(self, metric: InterimMetric) -> bool:
        return False

    def on_log(self, message: str) -> None:
        for context in self._contexts:
            context.log(message)


@contextlib.contextmanager
def _timed(trials: Sequence[_Trial], phase: Phase) -> Iterator[None]:
    """Count the block's duration (a monotonic clock) in ``phase`` of ``trials``, whether it raises or not.

    Each second counts once, in one phase of one trial, so that a job's phases add up to the
    time its trials held their slots:

    - a block of several trials (what the members of a fused group do together: fetching
      their inputs, training as one stack) is split evenly between them;
    - what a nested block counted (a member's own warm start or data loading inside the
      group's training, say) is taken out first, so it is not counted twice: the outer
      phase shares only the rest.
    """
    started = time.perf_counter()
    before = sum(sum(trial.phases.values()) for trial in trials)
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        nested = sum(sum(trial.phases.values()) for trial in trials) - before
        share = max(0.0, seconds - nested) / len(trials)
        for trial in trials:
            trial.phases[phase] = trial.phases.get(phase, 0.0) + share


def _timed_call(trial: _Trial, phase: Phase, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, counting its time in ``phase`` of ``trial`` (it runs inside a template's ``train()``)."""

    @functools.wraps(call)
    def timed(*args: Any, **kwargs: Any) -> Any:
        with _timed([trial], phase):
            return call(*args, **kwargs)

    return timed


def _plain_load(path: str, load: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``TrialContext.data_loader`` without a data cache: the template loads the dataset itself."""
    return load()


def _log_to_current(line: str) -> None:
    get_trial_context().log(line)


class _Heartbeat:
    """Beats for a claimed trial from a thread of its own, and passes on what the answers say.

    A stop reason left in the row reaches the trial's context. A claim that is no longer
    current (the trial was cancelled, or taken over after this worker went silent) stops
    the trial; so does ``time_limit_s``, which also stores the trial ERRORED. When the
    template does not stop within ``grace_s`` after either, ``on_overrun`` is called (a
    cluster worker exits: its process is replaced and the trial's work is dropped).
    """

    def __init__(
        self,
        gateway: TrialGateway,
        claim: TrialClaim,
        context: TrialContext,
        *,
        interval_s: float,
        time_limit_s: float | None,
        grace_s: float,
        on_overrun: Callable[[], None] | None,
    ) -> None:
        self._gateway = gateway
        self._claim = claim
        self._context = context
        self._interval = interval_s
        self._limit = time_limit_s
        self._grace = grace_s
        self._on_overrun = on_overrun
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="baobab-heartbeat", daemon=True)
        self.lost: str | None = None

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        started = time.monotonic()
        overrun_at: float | None = None
        while not self._done.wait(self._interval):
            now = time.monotonic()
            if self.lost is None and self._limit is not None and now - started > self._limit:
                self.lost = f"exceeded the per-trial time limit of {self._limit:g} s"
                self._end_errored(self.lost)
            if self.lost is None:
                try:
                    current, stop_reason = self._gateway.beat(self._claim)
                except StoreError as e:
                    logger.warning("trial %d: heartbeat failed: %s", self._claim.trial_id, e)
                    continue
                if not current:
                    self.lost = "the trial was cancelled or handed to another worker"
                elif stop_reason is not None:
                    self._context.request_stop(stop_reason)
            if self.lost is not None:
                self._context.request_stop(self.lost)
                overrun_at = now + self._grace if overrun_at is None else overrun_at
                if now >= overrun_at and self._on_overrun is not None:
                    logger.error("trial %d: %s, and it did not stop; giving it up", self._claim.trial_id, self.lost)
                    self._on_overrun()
                    return

    def _end_errored(self, error: str) -> None:
        try:
            self._gateway.finish(self._claim, TrialState.ERRORED, error=error)
        except StoreError as e:
            logger.warning("trial %d: cannot store that it %s: %s", self._claim.trial_id, error, e)


def _local_file(resources: WorkerResources, store: Any, what: str, key: str, checksum: str) -> str:
    try:
        return str(resources.files.path(store, key, checksum))
    except ArtifactError as e:
        raise TrialFailed(f"cannot fetch the {what}: {e}") from None


def _knobs(claim: TrialClaim, template: LoadedTemplate) -> dict[str, Any]:
    knobs = knobs_from_json(claim.knobs) if isinstance(claim.knobs, str) else dict(claim.knobs)
    try:
        return validate_knobs(template.config, knobs)
    except KnobConfigError as e:
        raise TrialFailed(f"the trial's knobs do not fit the template's knob config: {e}") from None


def _teardown(path: Path, model: BaseModel, context: TrialContext, *, failing: bool) -> None:
    try:
        call_template(path, "teardown()", model.teardown)
    except TrialFailed as e:
        if not failing:
            raise
        context.log(f"teardown() also failed: {e.error}")  # the first error is the one reported


def _shared_params(
    claim: TrialClaim, resources: WorkerResources, store: Any, context: TrialContext
) -> dict[str, Any] | None:
    """The parameters the trial starts from (SHARE_PARAMS): from this process's memory when its last
    unit of work produced them, or when another member of the trial's fused group read them already.

    Parameters that cannot be read leave the trial to start fresh, saying so in its log:
    sharing saves time, and its absence costs no more than that.
    """
    key = claim.shared_params_path
    if key is None:
        return None
    params = resources.shared.get(key)
    where = "memory"
    if params is None:
        try:
            data = resources.produced.get(key)
            if data is None:
                where = "the artifact store"
                data = store.get_bytes(key)
            params = params_from_bytes(data)
        except (ArtifactError, ParamsFormatError, OSError) as e:
            context.log(f"shared parameters {key} cannot be read ({e}); starting without them")
            return None
        resources.shared[key] = params
    context.log(f"starting from shared parameters {key} (from {where})")
    return dict(params)  # the arrays are the group's one copy; the dict is the trial's


def _zoo_for(claim: TrialClaim, template: LoadedTemplate, gateway: TrialGateway) -> Any:
    """The zoo, for a TorchModel trial; else None.

    Only TorchModel templates take part (the platform owns their training loop), so a
    worker whose templates never import torch never imports the zoo either.
    """
    return gateway.zoo() if _is_torch_model(template.cls) else None


def _architecture(model: BaseModel) -> dict[str, Any] | None:
    """The mutation record of the instance a SpaceModel trained, as JSON; None for any other template.

    Only a SpaceModel template imports the space package, so other workers never import it here.
    """
    space = sys.modules.get("baobab.space")
    if space is None or not isinstance(model, space.SpaceModel) or model.record is None:
        return None
    return dict(model.record.to_json())


@dataclass
class _Built:
    """A member's model, built for its claim and ready to train (see :func:`_build`)."""

    model: BaseModel
    knobs: dict[str, Any]
    train_args: dict[str, Any]  # train()'s keyword arguments but the shared parameters
    shared: dict[str, Any] | None
    zoo: Any


def _inputs(claim: TrialClaim, resources: WorkerResources, gateway: TrialGateway) -> tuple[LoadedTemplate, str, str]:
    """The template class and the local paths of the training and validation datasets."""
    store = gateway.artifacts
    template = resources.templates.get(store, claim.template_key, claim.template_checksum, claim.class_name)
    train_path = _local_file(resources, store, "training dataset", claim.train_key, claim.train_checksum)
    val_path = _local_file(resources, store, "validation dataset", claim.val_key, claim.val_checksum)
    return template, train_path, val_path


def _zoo_params(zoo: Any, trial_id: int) -> Callable[[int], dict[str, Any]] | None:
    """``TrialContext.zoo_params`` of a TorchModel trial (``zoo`` not None, else None): the module state of a
    zoo model its job's owner may see; one it cannot read raises a ValueError that the template's traceback shows."""
    if zoo is None:
        return None

    def read(zoo_model_id: int) -> dict[str, Any]:
        try:
            return dict(zoo.model_params(zoo_model_id, trial_id=trial_id))
        except (StoreError, ArtifactError, ParamsFormatError) as e:
            raise ValueError(f"zoo model {zoo_model_id} cannot be read for this trial: {e}") from None

    return read


def _build(
    trial: _Trial, template: LoadedTemplate, train_path: str, val_path: str, resources: WorkerResources
) -> _Built:
    """Seed, instantiate, and gather what ``train()`` takes (shared parameters, warm start, data cache)."""
    claim, context, gateway = trial.claim, trial.context, trial.gateway
    knobs = _knobs(claim, template)
    seed = trial_seed(claim.seed, claim.number)
    seed_globals(seed)
    zoo = _zoo_for(claim, template, gateway)
    path = template.path
    model = call_template(path, f"{claim.class_name}(**knobs)", template.cls, **knobs)
    with _torn_down_on_error(path, model, context):
        train_args = train_kwargs(template.cls, claim.train_arguments(), seed)
        shared = _shared_params(claim, resources, gateway.artifacts, context)
        # A job that switched warm starting off (its option) still adds its trained models to the zoo: the
        # switch is about where this job's training starts, and no template sees it.
        if zoo is not None and claim.warm_start:
            from baobab.zoo import make_warm_starter

            starter = make_warm_starter(zoo, trial_id=claim.trial_id, seed=seed, model=model)
            context.warm_starter = _timed_call(trial, Phase.WARM_START, starter)
        context.zoo_params = _zoo_params(zoo, claim.trial_id)
        loader = _plain_load
        if resources.data is not None:
            loader = resources.data.loader(
                model,
                template=f"{claim.template_checksum}:{claim.class_name}",
                datasets={train_path: claim.train_checksum, val_path: claim.val_checksum},
                log=context.log,
            )
        # A TorchModel loads its datasets through it (in train() and evaluate()): data loading, timed.
        context.data_loader = _timed_call(trial, Phase.FETCH, loader)
    return _Built(model, knobs, train_args, shared, zoo)


def _conclude(trial: _Trial, built: _Built, template: LoadedTemplate, val_path: str) -> _Trained:
    """Evaluate, dump and check a trained model, then tear it down."""
    claim, context, model, path = trial.claim, trial.context, built.model, template.path
    graph = None
    with _timed([trial], Phase.EVALUATE):
        with _torn_down_on_error(path, model, context):
            score = check_score(call_template(path, "evaluate()", model.evaluate, val_path))
            stop_reason = context.stop_reason
            data = params_bytes(path, model)
            if claim.check_reload:
                queries = sample_queries(Task(claim.task), val_path, count=_RELOAD_QUERIES, target=claim.target)
                check_reload(path, template.cls, built.knobs, model, data, queries)
            if built.zoo is not None:
                from baobab.zoo import model_graph

                graph = model_graph(model)  # before teardown(), which may free the module
            architecture = _architecture(model)
        _teardown(path, model, context, failing=False)
    return _Trained(score, data, stop_reason, None if graph is None else (built.zoo, graph), architecture)


@contextlib.contextmanager
def _torn_down_on_error(path: Path, model: BaseModel, context: TrialContext) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _teardown(path, model, context, failing=True)
        raise


def _train(trial: _Trial, resources: WorkerResources) -> _Trained:
    """Build, train, evaluate and dump one trial."""
    with trial_context(trial.context):
        with _timed([trial], Phase.FETCH):
            template, train_path, val_path = _inputs(trial.claim, resources, trial.gateway)
        built = _measured_build(trial, template, train_path, val_path, resources)
        with _timed([trial], Phase.TRAIN), _torn_down_on_error(template.path, built.model, trial.context):
            shared = {} if built.shared is None else {"shared_params": built.shared}
            call_template(template.path, "train()", built.model.train, train_path, **built.train_args, **shared)
        return _conclude(trial, built, template, val_path)


def _measured_build(
    trial: _Trial, template: LoadedTemplate, train_path: str, val_path: str, resources: WorkerResources
) -> _Built:
    """:func:`_build`, after measuring fusion when the trial's claim asks (job option fusion "auto"):
    the measurement is kept for the trial's final state, whatever that is."""
    claim = trial.claim
    if claim.fusion_profile is not None:
        torch_model = _is_torch_model(template.cls)
        zoo_params = _zoo_params(trial.gateway.zoo() if torch_model else None, claim.trial_id)
        knobs = _knobs(claim, template)
        data = resources.data
        with _timed([trial], Phase.PROFILE):
            trial.profile = measure_fusion(claim, template, knobs, train_path, val_path, data, torch_model, zoo_params)
        trial.context.log(profile_line(trial.profile))
    with _timed([trial], Phase.BUILD):
        return _build(trial, template, train_path, val_path, resources)


def _is_torch_model(cls: type[BaseModel]) -> bool:
    torch_model = sys.modules.get("baobab.model._torch")  # imported by the template if it is one
    return torch_model is not None and issubclass(cls, torch_model.TorchModel)


def _train_fused(
    trials: list[_Trial], resources: WorkerResources, template: LoadedTemplate, train_path: str, val_path: str
) -> dict[int, TrialOutcome]:
    """Train the members of a fused group as one stacked computation (:func:`baobab.model.train_fused`).

    Each member is built as :func:`_train` builds a trial (its seed, knobs, shared
    parameters, warm start; the global generators are seeded for it before it is built,
    not again before its ``train()``), and evaluated, dumped and stored as its own trial.
    One whose building fails, or that ``train_fused`` ends FAILED (its loss not finite, an
    error in its own hook), ends ERRORED alone.
    """
    from baobab.model import FusedStatus, train_fused

    outcomes: dict[int, TrialOutcome] = {}
    built: dict[int, _Built] = {}
    for trial in trials:
        with trial_context(trial.context):
            build = functools.partial(_measured_build, trial, template, train_path, val_path, resources)
            result = _attempt(trial, build)
        if isinstance(result, _Built):
            built[trial.claim.trial_id] = result
        else:
            outcomes[trial.claim.trial_id] = result
    members = [t for t in trials if t.claim.trial_id in built]
    if not members:
        return outcomes
    ready = [built[t.claim.trial_id] for t in members]
    try:
        with _timed(members, Phase.TRAIN):
            ends = train_fused(
                [b.model for b in ready],
                train_path,
                [t.context for t in members],
                shared_params=[b.shared for b in ready],
                train_args=[b.train_args for b in ready],
            )
    except Exception as e:  # not a member's doing (train_fused ends those itself): every member fails
        logger.exception("fused trials %s: train_fused failed", [t.claim.trial_id for t in members])
        summary = f"the fused training failed: {type(e).__name__}: {e}".splitlines()[0]
        for trial, member in zip(members, ready, strict=True):
            _teardown(template.path, member.model, trial.context, failing=True)
            outcomes[trial.claim.trial_id] = trial.failed(summary, traceback.format_exc())
        return outcomes
    for trial, member, end in zip(members, ready, ends, strict=True):
        with trial_context(trial.context):
            if end.status is FusedStatus.FAILED:
                _teardown(template.path, member.model, trial.context, failing=True)
                details = "" if end.error is None else template_traceback(end.error, template.path)
                outcomes[trial.claim.trial_id] = trial.failed(end.reason or "the fused training failed", details)
            else:
                conclude = functools.partial(_conclude, trial, member, template, val_path)
                outcomes[trial.claim.trial_id] = trial.settle(conclude)
    return outcomes


def _attempt(trial: _Trial, step: Callable[[], _Built]) -> _Built | TrialOutcome:
    """``step()``'s result, or the trial's outcome (ERRORED or INVALID) when it failed."""
    try:
        return step()
    except Exception as e:
        return trial.ended_by(e)


def run_trial(
    trial_id: int,
    resources: WorkerResources,
    *,
    gateway: TrialGateway,
    context: TrialContext | None = None,
    time_limit_s: float | None = None,
    on_overrun: Callable[[], None] | None = None,
) -> TrialOutcome:
    """Run the trial ``trial_id`` here if it can be claimed, and store its outcome (see the module docstring).

    Args:
        trial_id: the trial's row id.
        resources: the artifact store and caches of this worker.
        context: the trial's context, for callers that must reach it while the trial
            runs: :meth:`~baobab.model.TrialContext.request_stop` may be called from
            another thread, before or during the run (a stop requested before the run
            starts makes the template train briefly, if it checks ``should_stop``). Its
            sink is replaced by the one that stores metrics and logs.
        gateway: where to claim and report, and the trial's artifacts.
        time_limit_s: with a heartbeat, the trial ends ERRORED once it ran this long.
        on_overrun: with a heartbeat, called when a trial past its time limit, or no
            longer this worker's, does not stop within a grace period.

    Returns:
        The outcome; a template's failure is an ERRORED outcome (INVALID for an
        architecture it cannot build), never an exception.

    Raises:
        StoreError: the gateway failed (the trial may be left RUNNING).
    """
    contexts = None if context is None else [context]
    (outcome,) = run_trials(
        [trial_id], resources, gateways=[gateway], contexts=contexts, time_limit_s=time_limit_s, on_overrun=on_overrun
    )
    return outcome


def run_trials(
    trial_ids: Sequence[int],
    resources: WorkerResources,
    *,
    gateways: Sequence[TrialGateway],
    contexts: Sequence[TrialContext] | None = None,
    time_limit_s: float | None = None,
    on_overrun: Callable[[], None] | None = None,
) -> list[TrialOutcome]:
    """Run a unit of work: one trial as :func:`run_trial` does, or the members of a fused group.

    Each member is claimed through its own gateway (``gateways[i]`` for ``trial_ids[i]``,
    with that trial's token) and keeps its own context, records, heartbeat and outcome. The
    members claimed train together (:func:`baobab.model.train_fused`) when there are two or
    more of a TorchModel template; else each runs alone, one after the other. A member that
    cannot be claimed is not run: finished or cancelled, or RUNNING, which is the case of a
    group delivered again after its worker died. A group takes over no member (however
    silent its worker): the job driver requeues such a member alone once its heartbeat is
    stale.

    Returns:
        One outcome per trial id, in order.

    Raises:
        StoreError: the gateway failed (the members claimed may be left RUNNING).
    """
    outcomes: dict[int, TrialOutcome] = {}
    trials: list[_Trial] = []
    resources.start_unit()
    for index, (trial_id, gateway) in enumerate(zip(trial_ids, gateways, strict=True)):
        claim = gateway.claim(trial_id, resources.name, take_over=len(trial_ids) == 1)
        if isinstance(claim, ClaimRefused):
            logger.info("trial %d not run: %s", trial_id, claim.reason)
            outcomes[trial_id] = TrialOutcome(trial_id, claim.status, ran=False, retry_after_s=claim.retry_after_s)
            continue
        context = TrialContext() if contexts is None else contexts[index]
        alone = len(trial_ids) == 1
        trials.append(
            _Trial(claim, resources, gateway, context, time_limit_s=time_limit_s, on_overrun=on_overrun, alone=alone)
        )
    started = time.perf_counter()
    # What the template leaves running (a double-forked daemon too) becomes this process's
    # child, and is ended with the unit; the children it had before stay.
    become_subreaper()
    with contextlib.ExitStack() as stack:
        stack.callback(end_strays, children_of(os.getpid()))
        for trial in trials:
            stack.callback(trial.writer.close)
            if trial.heartbeat is not None:
                stack.enter_context(trial.heartbeat)
        group = TrialContext(sink=_GroupLog([t.context for t in trials]))
        with capture_prints(_log_to_current), trial_context(group):
            outcomes.update(_run_claimed(trials, resources))
    for trial in trials:
        trial_id = trial.claim.trial_id
        logger.info("trial %d %s in %.3f s", trial_id, outcomes[trial_id].status, time.perf_counter() - started)
    return [outcomes[trial_id] for trial_id in trial_ids]


def _run_claimed(trials: list[_Trial], resources: WorkerResources) -> dict[int, TrialOutcome]:
    if len(trials) > 1:
        first = trials[0]
        try:
            with _timed(trials, Phase.FETCH):
                template, train_path, val_path = _inputs(first.claim, resources, first.gateway)
        except Exception as e:  # the members' inputs are one sub-job's: none can run
            return {t.claim.trial_id: t.ended_by(e) for t in trials}
        if _is_torch_model(template.cls):
            return _train_fused(trials, resources, template, train_path, val_path)
    return {t.claim.trial_id: t.settle(functools.partial(_train, t, resources)) for t in trials}
