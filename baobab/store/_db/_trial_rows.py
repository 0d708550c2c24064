"""The worker's side of a trial row: claim it, beat, record, finish (the platform's side is ``_trial_control``).

Whoever runs a trial goes through these four statements, whether it holds the
database itself (a local worker) or reaches it through the admin API (a cluster
worker, which holds no credentials: the API calls the same functions). Keeping them in
one place is what makes the two modes agree on the rules:

- **claim**: ``PENDING → RUNNING`` (``attempts + 1``, ``worker``, ``started_at``,
  ``heartbeat_at``). The same worker claiming a trial it holds gets its claim again (an
  answer lost on the network is asked for twice). On a cluster a trial may be delivered again (the broker redelivers
  what a dead worker held, an advisor resubmits what looks lost), so a RUNNING trial
  whose heartbeat is older than ``stale_after_s`` is taken over the same way, unless it
  has used up ``max_attempts`` (then it ends ERRORED, saying so). A RUNNING trial with a
  fresh heartbeat is refused with the seconds after which to ask again; a finished one
  is refused for good.
- **beat**: refreshes ``heartbeat_at`` while the claim is still the current one and
  answers the stop reason a user or the advisor left in the row. A claim that is no
  longer current (the trial was cancelled, or taken over after a silence) is told so,
  and its worker drops the trial.
- **finish**: the final state, only while the claim is current, so a worker that was
  taken over cannot overwrite the outcome of the one that took over. A worker ends its
  trial COMPLETED or STOPPED with a score (and, for a SpaceModel, the ``architecture``
  it trained: its mutation record), ERRORED (the template or the run failed) or
  INVALID (the template found its architecture cannot be built), each of those two with
  its ``error`` and ``traceback``; CANCELLED is the platform's verdict, never a worker's.

A claim is current while the trial is RUNNING with the ``attempts`` it was claimed with.

A cluster worker sends a trial's outcome with the claim of its next trial, in one
request and one transaction (:func:`finish_trial_in` then :func:`claim_trial_in` in the
same session), and the interim metrics and log lines still unsent with the outcome:
each statement keeps its own rules, and a trial costs one round trip instead of three.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, Engine, and_, bindparam, exists, insert, or_, select, update
from sqlalchemy.orm import Session

from baobab.enums import TrialState
from baobab.store._db._engine import changed_rows, session_scope
from baobab.store._db._tables import Dataset, InterimMetric, ModelTemplate, SubJob, TrainJob, Trial, TrialLog
from baobab.store._resources import Launch

__all__ = [
    "ClaimRefused",
    "TrialClaim",
    "add_trial_records",
    "add_trial_records_in",
    "beat_trial",
    "claim_trial",
    "claim_trial_in",
    "finish_trial",
    "finish_trial_in",
    "trial_launch",
]


@dataclass(frozen=True)
class TrialClaim:
    """A trial just set RUNNING for a worker, and everything running it needs.

    ``attempt`` identifies the claim: beats and the final state carry it.
    ``shared_params_path`` is the artifact key of the parameters the trial starts from
    (SHARE_PARAMS; another trial's ``params_path``), None when it starts fresh.
    ``fusion_profile``, when set, asks the worker to measure how many copies of the trial's
    model one slot should train stacked, and to finish with the measurement.
    ``check_reload`` asks the worker to check that the trained model's dumped parameters
    reload into a fresh instance with the same predictions: until one trial of the
    sub-job has a score, no trial of it has been checked.
    """

    trial_id: int
    attempt: int
    number: int
    knobs: dict[str, Any]
    policies: dict[str, Any]
    seed: int
    template_key: str
    template_checksum: str
    class_name: str
    train_args: dict[str, Any]
    train_key: str
    train_checksum: str
    val_key: str
    val_checksum: str
    shared_params_path: str | None = None
    task: str = ""
    check_reload: bool = False
    #: The driver asks this trial to measure fusion first (``{"max_group": K}``; job option fusion "auto").
    fusion_profile: dict[str, Any] | None = None
    #: The job's options a worker reads (a job's stored options leave out those at their defaults, those of
    #: ``baobab.advisor.TrainJobOptions``): whether the trial starts from the zoo, and the zoo model its
    #: template trains on.
    warm_start: bool = True
    base_model: int | None = None
    #: The job's target column (a tabular job's field; None where it names none).
    target: str | None = None

    def train_arguments(self) -> dict[str, Any]:
        """What ``train()`` receives from the job: its train args, and ``base_model`` and ``target`` when the
        job names them (as keyword arguments: templates declare ``train(..., target="target")``)."""
        named = {"base_model": self.base_model, "target": self.target}
        return {**self.train_args, **{name: value for name, value in named.items() if value is not None}}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialClaim:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class ClaimRefused:
    """Why a trial was not handed out: ``status`` is its state now (None: no such trial).

    ``retry_after_s`` is set when another worker holds it with a fresh heartbeat: ask
    again after that many seconds, by when its silence would make it stale.
    """

    trial_id: int
    status: TrialState | None
    retry_after_s: float | None = None

    @property
    def reason(self) -> str:
        if self.status is None:
            return f"trial {self.trial_id} does not exist"
        if self.retry_after_s is not None:
            return f"trial {self.trial_id} is running on a worker that is alive"
        return f"trial {self.trial_id} is {self.status}"


_trials = Trial.__table__
_sub_jobs = SubJob.__table__
_templates = ModelTemplate.__table__
_jobs = TrainJob.__table__
_train_set = Dataset.__table__.alias("train_set")
_val_set = Dataset.__table__.alias("val_set")
_scored = Trial.__table__.alias("scored")


def _param(name: str, column: str) -> BindParameter[Any]:
    return bindparam(name, type_=_trials.c[column].type)


_RUNNING_VALUES = {
    "status": TrialState.RUNNING,
    "started_at": _param("b_now", "started_at"),
    "heartbeat_at": _param("b_now", "heartbeat_at"),
    "worker": _param("b_worker", "worker"),
    "attempts": _trials.c.attempts + 1,
    "finished_at": None,
}
_RETURNING = (
    _trials.c.number,
    _trials.c.knobs,
    _trials.c.policies,
    _trials.c.sub_job_id,
    _trials.c.attempts,
    _trials.c.shared_params_path,
    _trials.c.fusion_profile,
)
# Core statements, built once: a trial pays only for executing them.
_CLAIM = (
    update(_trials)
    .where(_trials.c.id == bindparam("b_id"), _trials.c.status == TrialState.PENDING)
    .values(**_RUNNING_VALUES)
    .returning(*_RETURNING)
)
_TAKE_OVER = (
    update(_trials)
    .where(
        _trials.c.id == bindparam("b_id"),
        _trials.c.status == TrialState.RUNNING,
        or_(_trials.c.heartbeat_at.is_(None), _trials.c.heartbeat_at < _param("b_stale", "heartbeat_at")),
        _trials.c.attempts < bindparam("b_max"),
    )
    .values(**_RUNNING_VALUES)
    .returning(*_RETURNING)
)
_GIVE_UP = (
    update(_trials)
    .where(
        _trials.c.id == bindparam("b_id"),
        _trials.c.status == TrialState.RUNNING,
        or_(_trials.c.heartbeat_at.is_(None), _trials.c.heartbeat_at < _param("b_stale", "heartbeat_at")),
    )
    .values(status=TrialState.ERRORED, finished_at=_param("b_now", "finished_at"), error=_param("b_error", "error"))
)
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
        _jobs.c.task,
        _jobs.c.options,
        _jobs.c.target,
        exists().where(_scored.c.sub_job_id == _sub_jobs.c.id, _scored.c.status.in_(TrialState.SCORED)).label("scored"),
    )
    .select_from(
        _sub_jobs.join(_templates, _sub_jobs.c.model_template_id == _templates.c.id)
        .join(_jobs, _sub_jobs.c.train_job_id == _jobs.c.id)
        .join(_train_set, _jobs.c.train_dataset_id == _train_set.c.id)
        .join(_val_set, _jobs.c.val_dataset_id == _val_set.c.id)
    )
    .where(_sub_jobs.c.id == bindparam("b_sub_job"))
)
_CURRENT = and_(
    _trials.c.id == bindparam("b_id"),
    _trials.c.status == TrialState.RUNNING,
    or_(bindparam("b_attempt", type_=_trials.c.attempts.type).is_(None), _trials.c.attempts == bindparam("b_attempt")),
)
_BEAT = (
    update(_trials)
    .where(_CURRENT)
    .values(heartbeat_at=_param("b_now", "heartbeat_at"))
    .returning(_trials.c.stop_reason)
)
_FINISH = (
    update(_trials)
    .where(_CURRENT)
    .values(
        status=_param("b_status", "status"),
        finished_at=_param("b_now", "finished_at"),
        score=_param("b_score", "score"),
        params_path=_param("b_params", "params_path"),
        error=_param("b_error", "error"),
        traceback=_param("b_traceback", "traceback"),
        architecture=_param("b_architecture", "architecture"),
        fusion_profile=_param("b_fusion_profile", "fusion_profile"),
        time_breakdown=_param("b_time_breakdown", "time_breakdown"),
        gpu_memory=_param("b_gpu_memory", "gpu_memory"),
    )
)
_STATE = select(_trials.c.status, _trials.c.heartbeat_at, _trials.c.worker).where(_trials.c.id == bindparam("b_id"))
# The same worker claiming again (its first answer was lost on the way): the claim it already has.
_MINE = (
    update(_trials)
    .where(
        _trials.c.id == bindparam("b_id"),
        _trials.c.status == TrialState.RUNNING,
        _trials.c.worker == _param("b_worker", "worker"),
    )
    .values(heartbeat_at=_param("b_now", "heartbeat_at"))
    .returning(*_RETURNING)
)


def claim_trial(
    engine: Engine,
    trial_id: int,
    worker: str,
    *,
    now: datetime,
    stale_after_s: float | None = None,
    max_attempts: int = 3,
) -> TrialClaim | ClaimRefused:
    """Claim ``trial_id`` for ``worker`` (see the module docstring).

    Args:
        stale_after_s: a RUNNING trial silent this long is taken over; None: never
            (one machine, where the executor sees its workers die and says so itself).
        max_attempts: a stale trial claimed this many times already ends ERRORED instead.
    """
    with session_scope(engine) as session:
        return claim_trial_in(
            session, trial_id, worker, now=now, stale_after_s=stale_after_s, max_attempts=max_attempts
        )


def claim_trial_in(
    session: Session,
    trial_id: int,
    worker: str,
    *,
    now: datetime,
    stale_after_s: float | None = None,
    max_attempts: int = 3,
) -> TrialClaim | ClaimRefused:
    """:func:`claim_trial` in the caller's ``session`` (committed by the caller)."""
    values = {"b_id": trial_id, "b_now": now, "b_worker": worker}
    row = session.execute(_CLAIM, values).first()
    if row is None:
        row = session.execute(_MINE, values).first()
    if row is None and stale_after_s is not None:
        stale = now - timedelta(seconds=stale_after_s)
        row = session.execute(_TAKE_OVER, {**values, "b_stale": stale, "b_max": max_attempts}).first()
        if row is None:
            error = (
                f"its worker went silent (no heartbeat for {stale_after_s:g} s) on each of its "
                f"{max_attempts} attempts; not run again"
            )
            session.execute(_GIVE_UP, {"b_id": trial_id, "b_now": now, "b_stale": stale, "b_error": error})
    if row is None:
        state = session.execute(_STATE, {"b_id": trial_id}).first()
        if state is None:
            return ClaimRefused(trial_id, None)
        retry = None
        if state.status is TrialState.RUNNING and stale_after_s is not None and state.heartbeat_at is not None:
            retry = max(0.0, stale_after_s - (now - state.heartbeat_at).total_seconds())
        return ClaimRefused(trial_id, state.status, retry)
    number, knobs, policies, sub_job_id, attempt, shared_params_path, fusion_profile = row
    inputs = session.execute(_INPUTS, {"b_sub_job": sub_job_id}).first()
    assert inputs is not None  # the foreign keys hold: a trial's sub-job, job, template and datasets exist
    seed, template_key, template_checksum, class_name, train_args, train_key, train_sum, val_key, val_sum = inputs[:9]
    task, options, target, scored = inputs[9:]
    options = options or {}
    return TrialClaim(
        trial_id=trial_id,
        attempt=attempt,
        number=number,
        knobs=dict(knobs),
        policies=dict(policies or {}),
        seed=seed,
        template_key=template_key,
        template_checksum=template_checksum,
        class_name=class_name,
        train_args=dict(train_args or {}),
        train_key=train_key,
        train_checksum=train_sum,
        val_key=val_key,
        val_checksum=val_sum,
        shared_params_path=shared_params_path,
        task=task.value,
        check_reload=not scored,
        fusion_profile=None if fusion_profile is None else dict(fusion_profile),
        warm_start=options.get("warm_start", True),
        base_model=options.get("base_model"),
        target=target,
    )


def trial_launch(engine: Engine, trial_id: int) -> Launch:
    """Whom the trial runs for and what its job asks each launch to get (owner 0: no such trial; its claim fails).

    Executors run each user's trials in a worker process of that user's own (its folder, its
    sandbox) that has the threads and memory the job's ``options.resources`` ask for, so they
    ask this before handing a trial over.
    """
    query = (
        select(TrainJob.owner_id, TrainJob.options)
        .join(SubJob, SubJob.train_job_id == TrainJob.id)
        .join(Trial, Trial.sub_job_id == SubJob.id)
        .where(Trial.id == trial_id)
    )
    with session_scope(engine) as session:
        row = session.execute(query).first()
    if row is None:
        return Launch(0)
    resources = (row.options or {}).get("resources") or {}
    return Launch(row.owner_id, resources.get("threads"), resources.get("memory_mb"))


def beat_trial(engine: Engine, trial_id: int, attempt: int, *, now: datetime) -> tuple[bool, str | None]:
    """Refresh the heartbeat of a current claim: (still current, stop reason left in the row)."""
    with session_scope(engine) as session:
        row = session.execute(_BEAT, {"b_id": trial_id, "b_attempt": attempt, "b_now": now}).first()
    return (False, None) if row is None else (True, row.stop_reason)


def finish_trial(
    engine: Engine,
    trial_id: int,
    attempt: int | None,
    status: TrialState,
    *,
    now: datetime,
    score: float | None = None,
    params_path: str | None = None,
    error: str | None = None,
    traceback: str | None = None,
    log_line: str | None = None,
    architecture: Mapping[str, Any] | None = None,
    fusion_profile: Mapping[str, Any] | None = None,
    time_breakdown: Mapping[str, float] | None = None,
    gpu_memory: Mapping[str, int] | None = None,
) -> TrialState | None:
    """Store the final state while the claim ``attempt`` is current (any claim when None).

    ``architecture`` is a SpaceModel trial's mutation record (``MutationRecord.to_json()``).
    ``fusion_profile`` is what the claim asked to measure with the measurement, whatever
    the state (the worker measures before training); it replaces the request.
    ``time_breakdown`` is the seconds the run spent per phase (``baobab.enums.TimePhase``);
    ``gpu_memory`` the peak and total MiB of the GPU it ran on (``peak_mb``, ``total_mb``).

    Returns the state the trial has now: ``status`` when it was stored, else what
    someone else stored (CANCELLED, or a take-over's RUNNING), None when the row is gone.

    Raises:
        ValueError: ``status`` is no outcome of a run (see the module docstring), a
            scored one without a score, or an unscored one with an architecture (only a
            trial that finished training has one).
    """
    with session_scope(engine) as session:
        return finish_trial_in(
            session,
            trial_id,
            attempt,
            status,
            now=now,
            score=score,
            params_path=params_path,
            error=error,
            traceback=traceback,
            log_line=log_line,
            architecture=architecture,
            fusion_profile=fusion_profile,
            time_breakdown=time_breakdown,
            gpu_memory=gpu_memory,
        )


def finish_trial_in(
    session: Session,
    trial_id: int,
    attempt: int | None,
    status: TrialState,
    *,
    now: datetime,
    score: float | None = None,
    params_path: str | None = None,
    error: str | None = None,
    traceback: str | None = None,
    log_line: str | None = None,
    architecture: Mapping[str, Any] | None = None,
    fusion_profile: Mapping[str, Any] | None = None,
    time_breakdown: Mapping[str, float] | None = None,
    gpu_memory: Mapping[str, int] | None = None,
) -> TrialState | None:
    """:func:`finish_trial` in the caller's ``session`` (committed by the caller)."""
    if status not in TrialState.RUN_OUTCOMES:
        outcomes = ", ".join(sorted(TrialState.RUN_OUTCOMES))
        raise ValueError(f"trial {trial_id}: a worker ends its trial {outcomes}, not {status}")
    if status.is_scored() and score is None:
        raise ValueError(f"trial {trial_id}: a {status} trial needs a score")
    if architecture is not None and not status.is_scored():
        raise ValueError(f"trial {trial_id}: only a trial that finished training has an architecture, not {status}")
    values = {
        "b_id": trial_id,
        "b_attempt": attempt,
        "b_status": status,
        "b_now": now,
        "b_score": score,
        "b_params": params_path,
        "b_error": error,
        "b_traceback": traceback,
        "b_architecture": None if architecture is None else dict(architecture),
        "b_fusion_profile": None if fusion_profile is None else dict(fusion_profile),
        "b_time_breakdown": None if time_breakdown is None else dict(time_breakdown),
        "b_gpu_memory": None if gpu_memory is None else dict(gpu_memory),
    }
    if changed_rows(session, _FINISH, values) != 1:
        return session.execute(select(_trials.c.status).where(_trials.c.id == trial_id)).scalar()
    if log_line is not None:
        add_trial_records_in(session, trial_id, (), [{"line": log_line, "time": now}])
    return status


def add_trial_records(
    engine: Engine, trial_id: int, metrics: Iterable[Mapping[str, Any]], logs: Iterable[Mapping[str, Any]]
) -> None:
    """Insert interim metrics (``step``, ``metrics``, ``time``) and log lines (``line``, ``time``) of one trial."""
    with session_scope(engine) as session:
        add_trial_records_in(session, trial_id, metrics, logs)


def add_trial_records_in(
    session: Session, trial_id: int, metrics: Iterable[Mapping[str, Any]], logs: Iterable[Mapping[str, Any]]
) -> None:
    """:func:`add_trial_records` in the caller's ``session`` (the rows a finish brings, before its outcome)."""
    metric_rows = [{"trial_id": trial_id, **row} for row in metrics]
    log_rows = [{"trial_id": trial_id, **row} for row in logs]
    if metric_rows:
        session.execute(insert(InterimMetric.__table__), metric_rows)
    if log_rows:
        session.execute(insert(TrialLog.__table__), log_rows)
