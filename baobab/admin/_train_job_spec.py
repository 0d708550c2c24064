"""A train job's specification, read once at the boundary: every check a job passes before it is created.

``POST /api/v1/train_jobs`` takes the fields of :class:`TrainJobBody`, a Pydantic model
(:class:`~baobab.admin._request_body.RequestBody`) that both parses the body and writes the
schema the API document shows (:data:`CREATE_SCHEMA`), so the two cannot drift apart; a new
setting of a job is one more field. Where a field has rules of its own home (the budget's in
:func:`~baobab.advisor.parse_budget`, with their schema beside them; the options' in
:class:`~baobab.advisor.TrainJobOptions`), the model's field hands the value to that home.
:func:`read_train_job_spec` reads the body alone: each field, then what ties fields
together (the job options need the budget). :func:`check_train_job_spec` then checks what
only the database knows: the datasets and templates the caller may see, of the job's task,
the zoo model ``options.base_model`` names (one the job's trials may read: the caller's own
or a PUBLIC one), and the plan each template's sub-job will run (an ENAS search needs its
policies and enough trials for one cycle and the final phases), which is the very check the
job driver makes, so a job answered 201 never ends ERRORED for its plan.

``train_args`` are what ``train()`` receives, and nothing else. The options that once rode
in them (:data:`MOVED_OPTIONS`) are still taken from there for one release: they move into
``options`` (naming both places is refused), errors name them where they were sent
(``train_args.policies.final_trials``), and the answer carries a ``Deprecation`` header.
The same goes for a tabular job's target column, now the job's field ``target``: a
``train_args.target`` of a tabular job moves there (``train()`` still receives it as its
``target`` argument). An image job has no target column, so ``target`` is refused for it,
and a ``train_args.target`` of its stays one more argument of its ``train()``.

``target`` is not checked against the training dataset's columns: a dataset row keeps no
columns (the CSV's header is in the artifact store, and reading it would put an artifact
read on the path of every create and forecast). A target the CSV lacks fails the job's first
trial, whose error names the column and the columns the file has.

A referenced dataset, model template or zoo model the caller may not see is refused with the same
message as a missing one (``no dataset 7``), so ids reveal nothing.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from flask import Response, after_this_request
from pydantic import AfterValidator, Field, PlainValidator, Strict, WithJsonSchema
from sqlalchemy.orm import Session

from baobab.admin._access import may_see_private, may_see_shared, shared_with
from baobab.admin._body import MAX_NAME_LENGTH, name_field
from baobab.admin._cluster_offer import ClusterOffer, check_resources
from baobab.admin._openapi import model_schema
from baobab.admin._query import MAX_ID
from baobab.admin._request_body import RequestBody, read_body
from baobab.advisor import (
    BUDGET_SCHEMA,
    STRATEGIES,
    Budget,
    JobOptions,
    JobOptionsError,
    TrainJobOptions,
    check_job_plan,
    parse_budget,
    parse_job_options,
)
from baobab.exceptions import BudgetError, RequestError, StrategyError
from baobab.model import DatasetFormat, Task, knob_config_from_json
from baobab.store import Dataset, ModelTemplate, User, ZooModel

__all__ = [
    "CREATE_SCHEMA",
    "DEPRECATION",
    "MOVED_OPTIONS",
    "TABULAR_TASKS",
    "TrainJobBody",
    "TrainJobSpec",
    "check_train_job_spec",
    "read_train_job_spec",
]

_APP = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: train() takes these itself (positional parameters, and the seed the platform derives per trial).
_RESERVED_TRAIN_ARGS = ("dataset_path", "shared_params", "seed")
_MAX_MODELS = 100
#: train_args as JSON, at most: a job's page shows them, and train() gets them in every trial.
_MAX_TRAIN_ARGS_BYTES = 64 * 1024
#: The job options a request may still send in ``train_args`` (deprecated: send them in ``options``).
MOVED_OPTIONS = ("early_stopping", "policies", "fusion", "enas", "warm_start", "base_model")
#: The ``Deprecation`` header (RFC 9745: since when) of an answer to a request that sent them there
#: (or a tabular job's ``target``).
DEPRECATION = "@1795910400"  # 2026-11-29
#: The tasks whose datasets have a target column, which a job's ``target`` names.
TABULAR_TASKS = tuple(task for task in Task if task.dataset_format is DatasetFormat.TABULAR)


@dataclass(frozen=True)
class TrainJobSpec:
    """A train job as the request asked for it, every field checked."""

    app: str
    task: Task
    train_dataset_id: int
    val_dataset_id: int
    model_ids: list[int]
    budget: Budget
    train_args: dict[str, Any]
    strategy: str
    seed: int
    #: A tabular job's target column; None when the job names none (or is an image job).
    target: str | None
    #: What the request asked for, as the job stores it.
    options: TrainJobOptions
    #: The same, as the driver reads it.
    job_options: JobOptions
    #: The options the request sent in ``train_args`` (the deprecated form).
    moved: tuple[str, ...] = ()

    def option_field(self, name: str) -> str:
        """Where the request sent option ``name``: ``options.<name>``, or ``train_args.<name>`` (deprecated)."""
        return f"{'train_args' if name in self.moved else 'options'}.{name}"


def _app(value: Any) -> str:
    app = name_field({"app": value}, "app", max_length=64)
    if not _APP.fullmatch(app):
        raise RequestError(
            f"'app' is {app!r}; use 1 to 64 letters, digits, '_', '.' or '-' (it appears in URLs)", field="app"
        )
    return app


def _distinct(model_ids: list[int]) -> list[int]:
    seen: dict[int, int] = {}
    for i, model_id in enumerate(model_ids):
        if model_id in seen:
            raise RequestError(
                f"model {model_id} is listed twice (model_ids[{seen[model_id]}] and model_ids[{i}]); list each once",
                field=f"model_ids[{i}]",
            )
        seen[model_id] = i
    return model_ids


def _budget(value: Any) -> Budget:
    try:
        return parse_budget(value)
    except BudgetError as e:
        if e.field == "budget":
            raise RequestError(str(e), field="budget") from None
        raise RequestError(f"budget.{e}", field=f"budget.{e.field}") from None


def _train_args(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(
            f"'train_args' must be an object of train() keyword arguments, got {value!r}", field="train_args"
        )
    for name in value:
        if name in _RESERVED_TRAIN_ARGS:
            raise RequestError(
                f"train_args may not set {name!r}: the platform passes it to train() itself "
                f"({', '.join(_RESERVED_TRAIN_ARGS)} are reserved)",
                field=f"train_args.{name}",
            )
    size = len(json.dumps(value))
    if size > _MAX_TRAIN_ARGS_BYTES:
        raise RequestError(
            f"'train_args' takes {size} bytes as JSON; at most {_MAX_TRAIN_ARGS_BYTES} are allowed "
            "(every view of the job carries them: send data as a dataset)",
            field="train_args",
        )
    return value


def _target(value: Any, field: str = "target") -> str:
    """A tabular job's target column: held to the rule for names (one line of visible text, at most
    :data:`MAX_NAME_LENGTH` characters), and kept as sent, not NFC-normalised as a name is, since it
    must match the CSV's header character for character."""
    name_field({field: value}, field)
    if len(value) > MAX_NAME_LENGTH:  # name_field counts the normalised form, which can be shorter
        raise RequestError(f"{field!r} has {len(value)} characters, at most {MAX_NAME_LENGTH} are allowed", field=field)
    return str(value)


def _options(value: Any) -> dict[str, Any]:
    """The options as sent (an object): :func:`read_train_job_spec` parses them with those from ``train_args``."""
    if not isinstance(value, dict):
        raise RequestError(f'\'options\' must be an object like {{"fusion": "auto"}}, got {value!r}', field="options")
    return value


def _strategy(value: Any) -> str:
    if value not in STRATEGIES:
        raise RequestError(f"'strategy' is {value!r}; expected one of {', '.join(STRATEGIES)}", field="strategy")
    return str(value)


class TrainJobBody(RequestBody):
    """``POST /train_jobs`` (and its forecast): what to train, on what data, within what budget, and how."""

    required_hints: ClassVar[Mapping[str, str]] = {
        "model_ids": ": a list of model template ids",
        "budget": ', e.g. {"MODEL_TRIAL_COUNT": 10} or {"TIME_HOURS": 0.5, "GPU_COUNT": 0}',
    }

    app: Annotated[
        str,
        PlainValidator(_app),
        WithJsonSchema(
            {"type": "string", "pattern": f"^{_APP.pattern}$", "description": "each job is a new version of it"}
        ),
    ]
    # Written out (not a $ref), as the web form reads the choices from the document.
    task: Annotated[Task, Strict(False), WithJsonSchema({"enum": [task.value for task in Task]})]
    train_dataset_id: int
    val_dataset_id: int
    model_ids: Annotated[list[int], Field(min_length=1, max_length=_MAX_MODELS), AfterValidator(_distinct)]
    budget: Annotated[Budget, PlainValidator(_budget), WithJsonSchema(BUDGET_SCHEMA)]
    train_args: Annotated[
        dict[str, Any],
        PlainValidator(_train_args),
        WithJsonSchema(
            {
                "type": "object",
                "description": "keyword arguments of train(), and nothing else (job options that are still sent "
                f"here are deprecated: {', '.join(MOVED_OPTIONS)} belong in options)",
            }
        ),
    ] = {}
    target: Annotated[
        str | None,
        PlainValidator(_target),
        WithJsonSchema(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_NAME_LENGTH,
                "description": f"{' and '.join(TABULAR_TASKS)} only: the datasets' target column, which train() "
                "receives as its target argument (left out: train() keeps its own default, and the platform's "
                "queries leave out the column 'target')",
            }
        ),
    ] = None
    options: Annotated[dict[str, Any], PlainValidator(_options, json_schema_input_type=TrainJobOptions)] = Field(
        {}, description="what the job asks the platform for"
    )
    strategy: Annotated[
        str,
        PlainValidator(_strategy),
        WithJsonSchema({"enum": list(STRATEGIES), "description": "the advisor's search strategy"}),
    ] = "auto"
    seed: Annotated[int, Field(ge=0, le=MAX_ID)] | None = Field(
        None,
        description="seeds every proposal and trial: the same seed, data and templates search the same way "
        "(default: a random one, shown in the job)",
    )


CREATE_SCHEMA = model_schema(TrainJobBody)


def read_train_job_spec() -> TrainJobSpec:
    """The request's body as a job's specification, each field and the job options checked.

    Raises:
        RequestError: naming the field at fault (budget keys as ``budget.TIME_HOURS``,
            templates as ``model_ids[i]``, options as ``options.policies.final_trials``).
    """
    body = read_body(TrainJobBody)
    budget, train_args, sent = body.budget, body.train_args, body.options
    target, target_moved = _job_target(body.task, body.target, train_args)
    moved = tuple(name for name in MOVED_OPTIONS if name in train_args)
    for name in moved:
        if name in sent:
            raise RequestError(
                f"'{name}' is sent both in train_args and in options; send it in options only",
                field=f"train_args.{name}",
            )
    if moved or target_moved:
        after_this_request(_deprecated)
    try:
        options = TrainJobOptions.parse({**sent, **{name: train_args[name] for name in moved}})
        job_options = parse_job_options(options, trial_count=budget.model_trial_count, gpu_count=budget.gpu_count)
    except JobOptionsError as e:
        where = e.field
        if any(where == f"options.{name}" or where.startswith(f"options.{name}.") for name in moved):
            where = "train_args" + where.removeprefix("options")
        raise RequestError(f"{where}: {str(e).removeprefix(f'{e.field}: ')}", field=where) from None
    left = (*moved, "target") if target_moved else moved
    return TrainJobSpec(
        app=body.app,
        task=body.task,
        train_dataset_id=body.train_dataset_id,
        val_dataset_id=body.val_dataset_id,
        model_ids=body.model_ids,
        budget=budget,
        strategy=body.strategy,
        # The one asked for, or a random one, kept so that the job can be repeated.
        seed=secrets.randbits(63) if body.seed is None else body.seed,
        train_args={name: value for name, value in train_args.items() if name not in left},
        target=target,
        options=options,
        job_options=job_options,
        moved=moved,
    )


def _job_target(task: Task, target: str | None, train_args: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The job's target column, and whether it came from ``train_args`` (the deprecated form).

    Raises:
        RequestError: ``target`` on an image job (``target``); a tabular job's ``train_args.target`` sent
            with ``target`` too, or not a name (``train_args.target``).
    """
    if task not in TABULAR_TASKS:
        if target is not None:
            raise RequestError(
                f"'target' is for {' and '.join(TABULAR_TASKS)} jobs, whose datasets have a target column; "
                f"a {task} job has none: leave 'target' out",
                field="target",
            )
        return None, False  # an image job's train_args.target is one more argument of its train()
    if "target" not in train_args:
        return target, False
    if target is not None:
        raise RequestError(
            "'target' is sent both in train_args and as the job's target; send it as target only",
            field="train_args.target",
        )
    return _target(train_args["target"], "train_args.target"), True


def _deprecated(response: Response) -> Response:
    response.headers["Deprecation"] = DEPRECATION
    return response


def check_train_job_spec(
    session: Session, user: User, spec: TrainJobSpec, *, cpu_slots: int, offer: ClusterOffer
) -> None:
    """Checks what ``spec`` names in the database, as ``user`` sees it, and the plan of each sub-job.

    Args:
        cpu_slots: the trials that run at once on CPUs (the job's cap when GPU_COUNT is 0).
        offer: what the cluster offers (:func:`~baobab.admin._cluster_offer.cluster_offer`): a job asking
            for more GPUs, or a launch for more cores or memory, would wait for ever, or before this
            check ran on the CPU without saying so.

    Raises:
        RequestError: a GPU_COUNT or ``options.resources`` above what the cluster offers, a dataset or
            template the user may not see or not of the job's task, an ``options.base_model`` that names no
            zoo model of the user's own or PUBLIC, or a template whose sub-job could not be planned (an ENAS
            search that does not fit the budget), naming the field at fault.
    """
    check_resources(spec.budget.gpu_count, spec.options, offer)
    _check_dataset(session, user, spec.train_dataset_id, "train_dataset_id", spec.task)
    _check_dataset(session, user, spec.val_dataset_id, "val_dataset_id", spec.task)
    if spec.options.base_model is not None:
        _check_base_model(session, user, spec.options.base_model, spec.option_field("base_model"))
    for i, model_id in enumerate(spec.model_ids):
        field = f"model_ids[{i}]"
        model = _check_model(session, user, model_id, field, spec.task)
        try:
            check_job_plan(
                spec.strategy,
                knob_config_from_json(model.knob_config),
                spec.job_options,
                trial_count=spec.budget.model_trial_count,
                time_hours=spec.budget.time_hours,
                workers=spec.budget.workers(cpu_slots),
            )
        except StrategyError as e:
            raise RequestError(f"model {model_id} ({model.name!r}) cannot be searched: {e}", field=field) from None


def _check_dataset(session: Session, user: User, dataset_id: int, field: str, task: Task) -> None:
    dataset = session.get(Dataset, dataset_id) if 1 <= dataset_id <= MAX_ID else None
    if dataset is None or not may_see_private(user, dataset):
        raise RequestError(f"no dataset {dataset_id}: give the id of one of your datasets", field=field)
    if dataset.format is not task.dataset_format:
        raise RequestError(
            f"dataset {dataset_id} ({dataset.name!r}) is {dataset.format}; a {task} job needs "
            f"{task.dataset_format} datasets",
            field=field,
        )


def _check_base_model(session: Session, user: User, zoo_model_id: int, field: str) -> None:
    """The zoo model must be one the job's trials may read: the user's own or a PUBLIC one (an admin's job
    sees no more than anyone's, as the trial's zoo routes do)."""
    model = session.get(ZooModel, zoo_model_id) if zoo_model_id <= MAX_ID else None
    if model is None or not shared_with(user.id, model):
        raise RequestError(
            f"no zoo model {zoo_model_id} that you may see: give the id of your own or a PUBLIC zoo model",
            field=field,
        )


def _check_model(session: Session, user: User, model_id: int, field: str, task: Task) -> ModelTemplate:
    model = session.get(ModelTemplate, model_id) if 1 <= model_id <= MAX_ID else None
    if model is None or not may_see_shared(user, model):
        raise RequestError(f"no model {model_id}: give the id of your own or a PUBLIC model template", field=field)
    if model.task is not task:
        raise RequestError(f"model {model_id} ({model.name!r}) is for {model.task}, not {task}", field=field)
    return model
