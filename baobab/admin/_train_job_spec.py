"""A train job's specification, read once at the boundary: every check a job passes before it is created.

``POST /api/v1/train_jobs`` takes the fields of :data:`FIELDS`. Each is declared once, as
its JSON schema (what the API document shows, :data:`CREATE_SCHEMA`) beside its parser
(what the request is held to), so the two cannot drift apart; a new setting of a job is
one more entry. The job's ``options`` are one Pydantic model,
:class:`~baobab.advisor.TrainJobOptions`, which both parses them and writes their schema.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flask import Response, after_this_request
from sqlalchemy.orm import Session

from baobab.admin._access import may_see_private, may_see_shared, shared_with
from baobab.admin._body import MAX_NAME_LENGTH, enum_field, json_object, name_field
from baobab.admin._cluster_offer import ClusterOffer, check_resources
from baobab.admin._openapi import register_model
from baobab.admin._query import MAX_ID
from baobab.advisor import (
    MIN_TIME_HOURS,
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
    "FIELDS",
    "MOVED_OPTIONS",
    "TABULAR_TASKS",
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
OPTIONS_SCHEMA = register_model(TrainJobOptions)


@dataclass(frozen=True)
class BodyField:
    """One field of the body: its schema and its parser, declared together.

    Attributes:
        parse: the field's value (None when absent or null: an optional field's parser
            gives its default) to what the job keeps; raises :class:`RequestError`.
        required: what "is required" adds as a hint, or None for an optional field.
    """

    name: str
    schema: Mapping[str, Any]
    parse: Callable[[Any], Any]
    required: str | None = None


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


def _task(value: Any) -> Task:
    return enum_field({"task": value}, "task", Task)


def _id(name: str) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RequestError(f"{name!r} must be an integer id, got {value!r}", field=name)
        return value

    return parse


def _model_ids(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise RequestError(f"'model_ids' must be a list of model template ids, got {value!r}", field="model_ids")
    if not value:
        raise RequestError("'model_ids' is empty: give at least one model template id", field="model_ids")
    if len(value) > _MAX_MODELS:
        raise RequestError(f"'model_ids' has {len(value)} ids, at most {_MAX_MODELS} are allowed", field="model_ids")
    seen: dict[int, int] = {}
    for i, model_id in enumerate(value):
        field = f"model_ids[{i}]"
        if isinstance(model_id, bool) or not isinstance(model_id, int):
            raise RequestError(f"{field!r} must be an integer id, got {model_id!r}", field=field)
        if model_id in seen:
            raise RequestError(
                f"model {model_id} is listed twice (model_ids[{seen[model_id]}] and {field}); list each once",
                field=field,
            )
        seen[model_id] = i
    return value


def _budget(value: Any) -> Budget:
    try:
        return parse_budget(value)
    except BudgetError as e:
        if e.field == "budget":
            raise RequestError(str(e), field="budget") from None
        raise RequestError(f"budget.{e}", field=f"budget.{e.field}") from None


def _train_args(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
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


def _target(value: Any, field: str = "target") -> str | None:
    """A tabular job's target column: held to the rule for names (one line of visible text, at most
    :data:`MAX_NAME_LENGTH` characters), and kept as sent, not NFC-normalised as a name is, since it
    must match the CSV's header character for character."""
    if value is None:
        return None
    name_field({field: value}, field)
    if len(value) > MAX_NAME_LENGTH:  # name_field counts the normalised form, which can be shorter
        raise RequestError(f"{field!r} has {len(value)} characters, at most {MAX_NAME_LENGTH} are allowed", field=field)
    return str(value)


def _options(value: Any) -> dict[str, Any]:
    """The options as sent (an object): :func:`read_train_job_spec` parses them with those from ``train_args``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(f'\'options\' must be an object like {{"fusion": "auto"}}, got {value!r}', field="options")
    return value


def _seed(value: Any) -> int:
    """The job's seed: the one asked for, or a random one (kept, so that the job can be repeated)."""
    if value is None:
        return secrets.randbits(63)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ID:
        raise RequestError(f"'seed' must be a whole number from 0 to {MAX_ID}, got {value!r}", field="seed")
    return value


def _strategy(value: Any) -> str:
    if value is None:
        return "auto"
    if value not in STRATEGIES:
        raise RequestError(f"'strategy' is {value!r}; expected one of {', '.join(STRATEGIES)}", field="strategy")
    return str(value)


FIELDS = (
    BodyField(
        "app",
        {"type": "string", "pattern": f"^{_APP.pattern}$", "description": "each job is a new version of it"},
        _app,
        required="",
    ),
    BodyField("task", {"enum": [task.value for task in Task]}, _task, required=""),
    BodyField("train_dataset_id", {"type": "integer"}, _id("train_dataset_id"), required=""),
    BodyField("val_dataset_id", {"type": "integer"}, _id("val_dataset_id"), required=""),
    BodyField(
        "model_ids",
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": _MAX_MODELS},
        _model_ids,
        required=": a list of model template ids",
    ),
    BodyField(
        "budget",
        {
            "type": "object",
            "description": "GPU_COUNT (0: CPU slots), TIME_HOURS and/or MODEL_TRIAL_COUNT (per template)",
            "properties": {
                "GPU_COUNT": {"type": "integer", "minimum": 0},
                "TIME_HOURS": {"type": "number", "minimum": MIN_TIME_HOURS},
                "MODEL_TRIAL_COUNT": {"type": "integer", "minimum": 1},
            },
        },
        _budget,
        required=', e.g. {"MODEL_TRIAL_COUNT": 10} or {"TIME_HOURS": 0.5, "GPU_COUNT": 0}',
    ),
    BodyField(
        "train_args",
        {
            "type": "object",
            "description": "keyword arguments of train(), and nothing else (job options that are still sent "
            f"here are deprecated: {', '.join(MOVED_OPTIONS)} belong in options)",
        },
        _train_args,
    ),
    BodyField(
        "target",
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_LENGTH,
            "description": f"{' and '.join(TABULAR_TASKS)} only: the datasets' target column, which train() "
            "receives as its target argument (left out: train() keeps its own default, and the platform's "
            "queries leave out the column 'target')",
        },
        _target,
    ),
    BodyField("options", {**OPTIONS_SCHEMA, "description": "what the job asks the platform for"}, _options),
    BodyField(
        "strategy",
        {"enum": list(STRATEGIES), "default": "auto", "description": "the advisor's search strategy"},
        _strategy,
    ),
    BodyField(
        "seed",
        {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_ID,
            "description": "seeds every proposal and trial: the same seed, data and templates search the same way "
            "(default: a random one, shown in the job)",
        },
        _seed,
    ),
)

CREATE_SCHEMA = {
    "type": "object",
    "required": [field.name for field in FIELDS if field.required is not None],
    "properties": {field.name: dict(field.schema) for field in FIELDS},
}


def read_train_job_spec() -> TrainJobSpec:
    """The request's body as a job's specification, each field and the job options checked.

    Raises:
        RequestError: naming the field at fault (budget keys as ``budget.TIME_HOURS``,
            templates as ``model_ids[i]``, options as ``options.policies.final_trials``).
    """
    body = json_object(fields=[field.name for field in FIELDS])
    values: dict[str, Any] = {}
    for field in FIELDS:
        value = body.get(field.name)
        if value is None and field.required is not None:
            raise RequestError(f"{field.name!r} is required{field.required}", field=field.name)
        values[field.name] = field.parse(value)
    budget: Budget = values["budget"]
    train_args, sent = values.pop("train_args"), values.pop("options")
    target, target_moved = _job_target(values["task"], values.pop("target"), train_args)
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
        job_options = parse_job_options(options, trial_count=budget.model_trial_count)
    except JobOptionsError as e:
        where = e.field
        if any(where == f"options.{name}" or where.startswith(f"options.{name}.") for name in moved):
            where = "train_args" + where.removeprefix("options")
        raise RequestError(f"{where}: {str(e).removeprefix(f'{e.field}: ')}", field=where) from None
    left = (*moved, "target") if target_moved else moved
    return TrainJobSpec(
        **values,
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
