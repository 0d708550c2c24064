"""A train job's options: what a job asks the platform for, apart from what ``train()`` receives.

They travel in the job's ``options``, beside its ``train_args`` (which go to ``train()`` and
nothing else)::

    "options": {
        "early_stopping": {"rule": "asha", "eta": 3},  # or "median", "none"; the rule's options
        "policies": {"EARLY_STOP": true, "DOWNSCALE": true, "SHARE_PARAMS": "best", "final_trials": 2},
        "fusion": {"max_group": 8},                    # or "off" (the default), "auto" (experimental)
        "enas": {"train_trials": 2, "warmup_fraction": 0.25},  # the enas strategy's cycle
        "warm_start": false,                           # true (the default): trials start from the zoo
        "base_model": 12,                              # a zoo model the template trains on
        "deterministic": true,                         # the same seed searches the same way
        "resources": {"threads": 4, "memory_mb": 8192} # what each launch of trials is given
    }

:class:`TrainJobOptions` declares each option once, as a Pydantic model: the admin API parses
a request's ``options`` with it, its JSON schema is the API document's (and the docs', which
are generated from that document), and the driver reads a stored job's options through it.
:func:`parse_job_options` turns it into :class:`JobOptions`, the driver's view, and checks
what ties options to the budget.

``early_stopping``: a rule of :data:`~baobab.advisor.STOPPING_RULES` fed with the interim
metrics of the search trials (``rule`` plus the rule's own options, see its class; a bare
rule name is short for ``{"rule": name}``). The rule's class holds the ranges of its options.

``policies``: EARLY_STOP and DOWNSCALE make the search cheap (short or small trials)
and add a final phase that retrains the ``final_trials`` best configurations with both
off; SHARE_PARAMS (true or ``"recent"``: the latest parameters of the sub-job,
``"best"``: the best-scored trial's) starts each trial from parameters an earlier trial
of the same sub-job produced. Policies a template does not declare are left off for it.
SKIP_TRAIN and QUICK_EVAL are the ENAS strategy's to set. The final phase starts when the
trials left are the final ones, or when the time left is at most the larger of
``final_fraction`` of TIME_HOURS and ``final_factor`` times the median search trial
(per round of final trials); it runs even when the time budget ends before it.

``fusion``: whether same-shaped trials of a sub-job may train as one stacked computation
(``{"max_group": K}``: groups of up to K, see :meth:`SubJobState.group_size
<baobab.advisor._scheduling.SubJobState.group_size>`; ``"off"``, the default: every trial
trains alone; ``"auto"``, experimental: a trial of a structure of a sub-job measures first
how many stacked copies of it one slot trains fastest, up to :data:`AUTO_MAX_GROUP`
(:func:`baobab.model.profile_fusion`), and later trials of that structure run in groups of
that size, alone where fusing does not pay: see :meth:`SubJobState.fusion_size
<baobab.advisor._scheduling.SubJobState.fusion_size>`). "auto" measures only where it may
pay (:meth:`SubJobState.profile_gate <baobab.advisor._scheduling.SubJobState.profile_gate>`):
never on a template that measured slower fused on the job's device kind, in this job or an
earlier one, and never past :data:`~baobab.advisor._scheduling.PROFILE_SHARE` of the time
the sub-job's trials ran so far. It is not the default because no benchmark has shown it
paying on CPU slots: on the example CNN every profile found sizes 8 and 16 slower than 1
(bench/user_job.py measures it against the default).

``enas``: options of the ENAS strategy's planner (:class:`~baobab.advisor.EnasPlanner`):
``train_trials`` (shared trainings per cycle), ``evaluate_trials`` (evaluations per
cycle), ``top_k`` (final evaluations) and ``warmup_fraction`` (the share of the budget
spent training the shared weights before the controller learns); each one the planner's
default when left out (:data:`~baobab.advisor.PLANNER_OPTIONS` holds their rules). Other
strategies ignore them.

``warm_start``: false trains every trial from scratch even where the zoo holds a similar
model (the job's trained models still join the zoo). ``base_model``: a zoo model whose
weights the template trains on (e.g. a frozen base under a searched head); the admin API
checks that the job's owner may read it, and the worker passes it on to ``train()`` as the
keyword argument ``base_model``. ``deterministic``: the same seed, data and templates run
the same trials whatever the number of workers and the order trials finish in.

``resources``: the threads and the memory each launch (a trial, or a fused group) is given,
each left out its slot's share (the machine's cores and memory over its trial slots). A
worker process serves one launch: its threads and memory are set before any template code
runs in it (:class:`baobab.store.Launch`).

Everything is checked once, at the boundary (the admin API parses with
:class:`TrainJobOptions`, so a bad value is a 400 naming the field); the driver trusts
what it gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    Tag,
    ValidationError,
    model_validator,
)

from baobab.advisor._enas_phases import PLANNER_OPTIONS, check_planner_option
from baobab.advisor._stopping import StoppingEvent, StoppingRule
from baobab.advisor._stopping_factory import make_stopping_rule
from baobab.exceptions import StrategyError
from baobab.model import Policy

__all__ = [
    "AUTO_MAX_GROUP",
    "JOB_OPTION_NAMES",
    "MAX_GROUP",
    "EarlyStopping",
    "EnasOptions",
    "FusionChoice",
    "FusionMode",
    "GpuShareChoice",
    "JobOptions",
    "JobOptionsError",
    "MaxGroup",
    "PolicyOptions",
    "ResourceOptions",
    "ShareFrom",
    "StoppingRuleName",
    "TrainJobOptions",
    "parse_job_options",
]

#: The largest fused group a job may ask for.
MAX_GROUP = 1024
#: The largest group "auto" measures: past it a CPU slot's stack has stopped gaining (784-32-10 MLP: 2.4x at
#: 16 and 32, 1.8x at 64 on one thread), and on a GPU the profile's memory check stops it sooner for most models.
AUTO_MAX_GROUP = 64
#: Bounds of a launch's resources as a job may ask for them. Below 512 MiB a worker process that imports
#: numpy and a template has no room left; the upper bounds only keep a request a sane number.
MAX_THREADS = 4096
MIN_MEMORY_MB = 512
MAX_MEMORY_MB = 2**24
#: The policies that make a search trial cheaper than the final model it stands for.
_REDUCING = frozenset({Policy.EARLY_STOP, Policy.DOWNSCALE})


class StoppingRuleName(StrEnum):
    """The early-stopping rules a job may ask for (the names of baobab.advisor.STOPPING_RULES)."""

    NONE = "none"
    ASHA = "asha"
    MEDIAN = "median"


class ShareFrom(StrEnum):
    """Whose parameters a SHARE_PARAMS trial starts from: the sub-job's latest, or its best-scored trial's."""

    RECENT = "recent"
    BEST = "best"


class FusionChoice(StrEnum):
    """The fusion option's named choices; an object with max_group is the third form."""

    OFF = "off"
    AUTO = "auto"


class GpuShareChoice(StrEnum):
    """Whether several of a GPU job's trials may share each of its GPUs (``resources.gpu_share``)."""

    OFF = "off"
    AUTO = "auto"


class FusionMode(StrEnum):
    """How a job's trials fuse, as the driver reads it: the choices, or up to ``max_group`` per group."""

    OFF = "off"
    AUTO = "auto"
    MAX_GROUP = "max_group"


class JobOptionsError(StrategyError):
    """A job option breaks a rule; ``field`` names it as the API shows it (``options.policies.final_trials``)."""

    def __init__(self, message: str, *, field: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class _Declared(BaseModel):
    """What every part of the options is held to: JSON types as sent (no "1" for 1, no true for 1), no unknown
    key, finite numbers."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def _rule_check(options: EarlyStopping) -> EarlyStopping:
    try:
        make_stopping_rule(options.rule, **(options.model_extra or {}))
    except StrategyError as e:
        raise ValueError(str(e)) from None
    return options


class EarlyStopping(_Declared):
    """A stopping rule and its own options, which the rule's class checks (their one home)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    rule: Annotated[StoppingRuleName, Strict(False)] = Field(
        description="asha: eta, min_resource, max_resource, metric, mode; "
        "median: grace_steps, min_trials, metric, mode (see the rules' classes)",
    )

    @model_validator(mode="after")
    def _checked(self) -> EarlyStopping:
        return _rule_check(self)


def _share_from(value: Any) -> Any:
    if isinstance(value, bool) or value in tuple(ShareFrom):
        return value
    raise ValueError(f'must be true, false, "recent" or "best", got {value!r}')


_SHARE_DOC = 'true or "recent": the sub-job\'s latest parameters; "best": the best-scored trial\'s'


class PolicyOptions(_Declared):
    """The policies a job asks for and the final phase that follows a reduced search."""

    EARLY_STOP: bool = Field(default=False, description="search trials train briefly")
    DOWNSCALE: bool = Field(default=False, description="search trials build smaller models")
    SHARE_PARAMS: Annotated[bool | Annotated[ShareFrom, Strict(False)], BeforeValidator(_share_from)] = Field(
        default=False, description='true or "recent": the sub-job\'s latest parameters; "best": the best trial\'s'
    )
    final_trials: int = Field(default=1, ge=1, description="configurations the final phase retrains")
    final_factor: float = Field(default=4.0, ge=1, description="final phase time, in median search trials")
    final_fraction: float = Field(default=0.2, ge=0, lt=1, description="share of TIME_HOURS kept for the final phase")


class EnasOptions(_Declared):
    """The ENAS planner's cycle; each option left out is the planner's default."""

    train_trials: Annotated[int | None, AfterValidator(lambda v: _planner("train_trials", v))] = Field(
        default=None, description=f"shared trainings per cycle: {PLANNER_OPTIONS['train_trials'][1]}"
    )
    evaluate_trials: Annotated[int | None, AfterValidator(lambda v: _planner("evaluate_trials", v))] = Field(
        default=None, description=f"evaluations per cycle: {PLANNER_OPTIONS['evaluate_trials'][1]}"
    )
    top_k: Annotated[int | None, AfterValidator(lambda v: _planner("top_k", v))] = Field(
        default=None, description=f"final evaluations: {PLANNER_OPTIONS['top_k'][1]}"
    )
    warmup_fraction: Annotated[float | None, AfterValidator(lambda v: _planner("warmup_fraction", v))] = Field(
        default=None,
        description=f"share of the budget warming the shared weights first: {PLANNER_OPTIONS['warmup_fraction'][1]}",
    )


class ResourceOptions(_Declared):
    """What each launch of the job's trials (a trial, or a fused group) is given; each left out is its slot's share.

    The bounds here are those of a request; the admin API also refuses a job asking for more than
    any worker machine has (from the workers' inventories), naming what the cluster offers.
    """

    threads: int | None = Field(
        default=None,
        ge=1,
        le=MAX_THREADS,
        description="threads of every numeric library's pool in a launch (default: the machine's cores / its slots)",
    )
    memory_mb: int | None = Field(
        default=None,
        ge=MIN_MEMORY_MB,
        le=MAX_MEMORY_MB,
        description="MiB of data a launch may hold; past it an allocation fails and the trial ends ERRORED "
        "(default: BAOBAB_TRIAL_MEMORY_MB, else the machine's memory / its slots)",
    )
    gpu_share: Annotated[GpuShareChoice, Strict(False)] = Field(
        default=GpuShareChoice.OFF,
        description='"off": one trial per GPU of GPU_COUNT; "auto" (experimental): several of the job\'s trials '
        "share each GPU while their measured memory fits and together they train faster",
    )


def _planner(name: str, value: Any) -> Any:
    """The planner's rule for option ``name`` (its one home), as a validator."""
    if value is not None:
        try:
            check_planner_option(name, value)
        except StrategyError as e:
            raise ValueError(str(e)) from None
    return value


class MaxGroup(_Declared):
    """Fused groups of up to max_group trials."""

    max_group: int = Field(ge=1, le=MAX_GROUP)


def _branch(value: Any) -> str | None:
    """The branch of a choice-or-object option ``value`` takes: a name, an object, or neither (an error)."""
    if isinstance(value, str):
        return "_name"
    return "_object" if isinstance(value, dict | BaseModel) else None


_StoppingForm = Annotated[
    Annotated[StoppingRuleName, Strict(False), Tag("_name")] | Annotated[EarlyStopping, Tag("_object")],
    Discriminator(
        _branch,
        custom_error_type="early_stopping_form",
        custom_error_message='must be a rule name or an object like {"rule": "asha", "eta": 3}',
    ),
]
_FusionForm = Annotated[
    Annotated[FusionChoice, Strict(False), Tag("_name")] | Annotated[MaxGroup, Tag("_object")],
    Discriminator(
        _branch,
        custom_error_type="fusion_form",
        custom_error_message='must be "off", "auto" or an object like {"max_group": 8}',
    ),
]
#: The parts of an error's location that name a branch of a choice, not a field.
_BRANCHES = frozenset({"_name", "_object"})


class TrainJobOptions(_Declared):
    """What a train job asks the platform for; each option left out or null is its default."""

    early_stopping: _StoppingForm = Field(
        default=StoppingRuleName.NONE,
        description='a rule name, or the rule and its options, e.g. {"rule": "asha", "eta": 3}',
    )
    policies: PolicyOptions = Field(
        default_factory=PolicyOptions, description='e.g. {"EARLY_STOP": true, "SHARE_PARAMS": "best"}'
    )
    fusion: _FusionForm = Field(
        default=FusionChoice.OFF,
        description='whether same-shaped trials train stacked: "off", "auto" (experimental) or {"max_group": K}',
    )
    enas: EnasOptions = Field(
        default_factory=EnasOptions,
        description='the enas strategy\'s cycle, e.g. {"train_trials": 2, "warmup_fraction": 0.25}',
    )
    warm_start: bool = Field(default=True, description="trials start from the most similar zoo model")
    base_model: int | None = Field(
        default=None,
        ge=1,
        description="a zoo model (your own or a PUBLIC one) whose weights the template trains on, "
        "e.g. as a frozen base under a searched head; passed on to train() as base_model",
    )
    deterministic: bool = Field(
        default=False, description="the same seed searches the same way whatever the workers and finishing order"
    )
    resources: ResourceOptions = Field(
        default_factory=ResourceOptions,
        description='what each launch of trials is given, e.g. {"threads": 4, "memory_mb": 8192}',
    )

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, value: Any) -> Any:
        return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value

    @classmethod
    def parse(cls, value: Any, *, at: str = "options") -> TrainJobOptions:
        """``value`` (a JSON object, or None for the defaults) as options.

        Args:
            at: where ``value`` is in the request, the start of a field's name in an error.

        Raises:
            JobOptionsError: naming the first field at fault (``options.policies.final_trials``).
        """
        try:
            return cls.model_validate({} if value is None else value)
        except ValidationError as e:
            raise _options_error(e, at) from None

    def to_json(self) -> dict[str, Any]:
        """Every option, defaults included: what a job stores and shows."""
        return self.model_dump(mode="json", exclude_none=False)


JOB_OPTION_NAMES: tuple[str, ...] = tuple(TrainJobOptions.model_fields)


def _options_error(error: ValidationError, at: str) -> JobOptionsError:
    first = error.errors(include_url=False)[0]
    loc = [part for part in first["loc"] if part not in _BRANCHES or not isinstance(part, str)]
    kind, given = first["type"], first.get("input")
    if kind == "model_type" and not loc:
        return JobOptionsError(
            f'must be an object like {{"policies": {{"EARLY_STOP": true}}}}, got {given!r}', field=at
        )
    here = ".".join([at, *(str(p) for p in loc)])
    if kind == "extra_forbidden":
        known = ", ".join(_known_keys(loc[:-1]))
        hint = " (the enas strategy sets it)" if loc[-1] in (Policy.SKIP_TRAIN, Policy.QUICK_EVAL) else ""
        return JobOptionsError(f"unknown key {loc[-1]!r}{hint}; known keys: {known}", field=here)
    ctx = first.get("ctx") or {}
    if kind == "missing":
        return JobOptionsError("is required", field=here)
    if kind == "value_error":
        return JobOptionsError(str(ctx.get("error", first["msg"])), field=here)
    rule = _RULES.get(kind)
    text = rule.format(**ctx) if rule else str(first["msg"]).replace("Input should be", "must be")
    return JobOptionsError(f"{text}, got {given!r}", field=here)


#: Error kinds worded as the rest of the API words them.
_RULES = {
    "bool_type": "must be true or false",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "enum": "must be {expected}",
}


def _known_keys(loc: list[Any]) -> list[str]:
    """The keys the object at ``loc`` (within the options) takes."""
    model: type[BaseModel] = TrainJobOptions
    for part in loc:
        annotation = model.model_fields[str(part)].annotation
        model = next(cls for cls in _models_in(annotation))
    return list(model.model_fields)


def _models_in(annotation: Any) -> Iterable[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()) or getattr(annotation, "__metadata__", ()):
        yield from _models_in(arg)
    origin = getattr(annotation, "__origin__", None)
    if origin is not None:
        yield from _models_in(origin)


@dataclass(frozen=True)
class JobOptions:
    """What the driver reads of a job's options (:func:`parse_job_options`); the defaults ask for nothing."""

    stopping_rule: StoppingRuleName = StoppingRuleName.NONE
    stopping_options: Mapping[str, Any] = field(default_factory=dict)
    policies: frozenset[Policy] = frozenset()
    share_from: ShareFrom = ShareFrom.RECENT
    final_trials: int = 1
    final_factor: float = 4.0
    final_fraction: float = 0.2
    fusion: FusionMode = FusionMode.OFF
    #: The largest group under :attr:`FusionMode.MAX_GROUP`; None otherwise.
    max_group: int | None = None
    #: The ENAS planner's options the job set (keyword arguments of :class:`~baobab.advisor.EnasPlanner`).
    enas: Mapping[str, Any] = field(default_factory=dict)
    #: Same trials, knobs and best configuration for a seed whatever the workers and finishing order.
    deterministic: bool = False
    #: The threads each launch asks for (``resources.threads``; None: a slot's share).
    threads: int | None = None
    #: Whether several of its trials may share each of its GPUs (``resources.gpu_share``).
    gpu_share: GpuShareChoice = GpuShareChoice.OFF

    @property
    def reduced_search(self) -> frozenset[Policy]:
        """The asked-for policies that make search trials cheaper than a final model (a final phase follows)."""
        return self.policies & _REDUCING

    def largest_group(self, *, measured: bool) -> int:
        """The most trials a fused group may hold under the ``fusion`` option: ``max_group``'s K, under
        ``auto`` :data:`AUTO_MAX_GROUP` once a profile was ``measured`` (1 before), 1 when off."""
        if self.fusion is FusionMode.MAX_GROUP:
            return self.max_group or 1
        return AUTO_MAX_GROUP if self.fusion is FusionMode.AUTO and measured else 1

    def stopping_rule_for(self, history: Iterable[StoppingEvent] = ()) -> StoppingRule:
        return make_stopping_rule(self.stopping_rule, history=history, **self.stopping_options)


def parse_job_options(
    options: Mapping[str, Any] | TrainJobOptions | None,
    *,
    trial_count: int | None = None,
    gpu_count: int | None = None,
) -> JobOptions:
    """A job's ``options`` (JSON, or already parsed) as the driver reads them, checked against the budget.

    Args:
        trial_count: the job's MODEL_TRIAL_COUNT, which must leave room for the final trials.
        gpu_count: the job's GPU_COUNT, which ``resources.gpu_share`` needs above 0 (None: not checked).

    Raises:
        JobOptionsError: naming the field at fault (``budget.MODEL_TRIAL_COUNT`` when the final
            trials take every trial, ``options.resources.gpu_share`` on a job of no GPU).
    """
    parsed = options if isinstance(options, TrainJobOptions) else TrainJobOptions.parse(options)
    stopping = parsed.early_stopping
    rule, rule_options = (
        (stopping, {}) if isinstance(stopping, StoppingRuleName) else (stopping.rule, dict(stopping.model_extra or {}))
    )
    wanted = parsed.policies
    policies = {Policy(name) for name in (Policy.EARLY_STOP, Policy.DOWNSCALE) if getattr(wanted, name)}
    if wanted.SHARE_PARAMS is not False:
        policies.add(Policy.SHARE_PARAMS)
    reduced = policies & _REDUCING
    if reduced and trial_count is not None and trial_count <= wanted.final_trials:
        raise JobOptionsError(
            f"MODEL_TRIAL_COUNT={trial_count} leaves no search trial before the {wanted.final_trials} final "
            f"trial(s) that {' and '.join(sorted(reduced))} ask for; raise it above {wanted.final_trials}",
            field="budget.MODEL_TRIAL_COUNT",
        )
    if gpu_count == 0 and parsed.resources.gpu_share is GpuShareChoice.AUTO:
        raise JobOptionsError(
            'is "auto", which shares the job\'s GPUs among its trials, but budget.GPU_COUNT is 0: ask for GPUs, '
            'or leave it "off"',
            field="options.resources.gpu_share",
        )
    fusion = parsed.fusion
    return JobOptions(
        stopping_rule=rule,
        stopping_options=rule_options,
        policies=frozenset(policies),
        share_from=ShareFrom.BEST if wanted.SHARE_PARAMS == ShareFrom.BEST else ShareFrom.RECENT,
        final_trials=wanted.final_trials,
        final_factor=wanted.final_factor,
        final_fraction=wanted.final_fraction,
        fusion=FusionMode.MAX_GROUP if isinstance(fusion, MaxGroup) else FusionMode(fusion),
        max_group=fusion.max_group if isinstance(fusion, MaxGroup) else None,
        enas=parsed.enas.model_dump(exclude_none=True),
        deterministic=parsed.deterministic,
        threads=parsed.resources.threads,
        gpu_share=parsed.resources.gpu_share,
    )
