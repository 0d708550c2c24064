"""A train job's search options: which policies, which early-stopping rule, how trials fuse.

They travel in the job's ``train_args`` under three reserved keys, which the worker never
passes to ``train()`` (:data:`baobab.model.JOB_OPTION_KEYS`)::

    "train_args": {
        "lr": 0.01,                                   # passed to train()
        "early_stopping": {"rule": "asha", "eta": 3}, # or "median", "none"; the rule's options
        "policies": {"EARLY_STOP": true, "DOWNSCALE": true, "SHARE_PARAMS": "best", "final_trials": 2},
        "fusion": {"max_group": 8},                   # or "off" (the default), "auto" (experimental)
        "enas": {"train_trials": 2, "warmup_fraction": 0.25}  # the enas strategy's cycle
    }

``early_stopping``: a rule of :data:`~baobab.advisor.STOPPING_RULES` fed with the interim
metrics of the search trials (``rule`` plus the rule's own options, see its class).

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

Everything is checked once, by :func:`parse_job_options` (the admin API calls it, so a
bad value is a 400 naming the field); the driver trusts what it gets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from baobab.advisor._enas_phases import PLANNER_OPTIONS, check_planner_option
from baobab.advisor._stopping import StoppingEvent, StoppingRule
from baobab.advisor._stopping_factory import STOPPING_RULES, make_stopping_rule
from baobab.exceptions import StrategyError
from baobab.model import JOB_OPTION_KEYS, Policy

__all__ = [
    "EARLY_STOPPING_KEY",
    "AUTO_MAX_GROUP",
    "ENAS_KEY",
    "FUSION_KEY",
    "MAX_GROUP",
    "POLICIES_KEY",
    "JobOptions",
    "JobOptionsError",
    "parse_job_options",
]

EARLY_STOPPING_KEY, POLICIES_KEY, FUSION_KEY, ENAS_KEY = JOB_OPTION_KEYS
#: Policies a job may ask for; SKIP_TRAIN and QUICK_EVAL only make sense inside ENAS's cycle.
_SEARCH_POLICIES = (Policy.EARLY_STOP, Policy.DOWNSCALE, Policy.SHARE_PARAMS)
#: The policies that make a search trial cheaper than the final model it stands for.
_REDUCING = frozenset({Policy.EARLY_STOP, Policy.DOWNSCALE})
_SHARE_FROM = ("recent", "best")
#: The largest fused group a job may ask for.
MAX_GROUP = 1024
#: The largest group "auto" measures: past it a CPU slot's stack has stopped gaining (784-32-10 MLP: 2.4x at
#: 16 and 32, 1.8x at 64 on one thread), and on a GPU the profile's memory check stops it sooner for most models.
AUTO_MAX_GROUP = 64


class JobOptionsError(StrategyError):
    """A job option breaks a rule; ``field`` names it as the API shows it (``train_args.policies.final_trials``)."""

    def __init__(self, message: str, *, field: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class JobOptions:
    """What :func:`parse_job_options` read; the defaults ask for nothing."""

    stopping_rule: str = "none"
    stopping_options: Mapping[str, Any] = field(default_factory=dict)
    policies: frozenset[Policy] = frozenset()
    share_from: str = "recent"
    final_trials: int = 1
    final_factor: float = 4.0
    final_fraction: float = 0.2
    #: "off" (the default), "auto" (experimental), or "max_group" (then ``max_group`` is the largest group).
    fusion: str = "off"
    max_group: int | None = None
    #: The ENAS planner's options the job set (keyword arguments of :class:`~baobab.advisor.EnasPlanner`).
    enas: Mapping[str, Any] = field(default_factory=dict)
    #: Same trials, knobs and best configuration for a seed whatever the workers and finishing order.
    deterministic: bool = False

    @property
    def reduced_search(self) -> frozenset[Policy]:
        """The asked-for policies that make search trials cheaper than a final model (a final phase follows)."""
        return self.policies & _REDUCING

    def largest_group(self, *, measured: bool) -> int:
        """The most trials a fused group may hold under the ``fusion`` option: ``max_group``'s K, under
        ``auto`` :data:`AUTO_MAX_GROUP` once a profile was ``measured`` (1 before), 1 when off."""
        if self.fusion == "max_group":
            return self.max_group or 1
        return AUTO_MAX_GROUP if self.fusion == "auto" and measured else 1

    def stopping_rule_for(self, history: Iterable[StoppingEvent] = ()) -> StoppingRule:
        return make_stopping_rule(self.stopping_rule, history=history, **self.stopping_options)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _early_stopping(value: object) -> tuple[str, dict[str, Any]]:
    where = f"train_args.{EARLY_STOPPING_KEY}"
    if isinstance(value, str):
        value = {"rule": value}
    if not isinstance(value, Mapping):
        raise JobOptionsError(
            f'must be a rule name or an object like {{"rule": "asha", "eta": 3}}, got {value!r}', field=where
        )
    options = dict(value)
    rule = options.pop("rule", None)
    if rule not in STOPPING_RULES:
        raise JobOptionsError(f"'rule' is {rule!r}; expected one of {', '.join(STOPPING_RULES)}", field=f"{where}.rule")
    try:
        make_stopping_rule(rule, **options)
    except StrategyError as e:
        raise JobOptionsError(str(e), field=where) from None
    return rule, options


def _fusion(value: object) -> dict[str, Any]:
    where = f"train_args.{FUSION_KEY}"
    if value in ("auto", "off"):
        return {"fusion": value}
    if isinstance(value, Mapping) and set(value) == {"max_group"}:
        k = value["max_group"]
        if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_GROUP:
            return {"fusion": "max_group", "max_group": k}
        raise JobOptionsError(f"must be a whole number from 1 to {MAX_GROUP}, got {k!r}", field=f"{where}.max_group")
    raise JobOptionsError(f'must be "auto", "off" or an object like {{"max_group": 8}}, got {value!r}', field=where)


def _enas(value: object) -> dict[str, Any]:
    where = f"train_args.{ENAS_KEY}"
    if not isinstance(value, Mapping):
        raise JobOptionsError(f'must be an object like {{"train_trials": 2}}, got {value!r}', field=where)
    for key, item in value.items():
        if key not in PLANNER_OPTIONS:
            raise JobOptionsError(
                f"unknown key {key!r}; known keys: {', '.join(PLANNER_OPTIONS)}", field=f"{where}.{key}"
            )
        try:
            check_planner_option(key, item)
        except StrategyError as e:
            raise JobOptionsError(str(e), field=f"{where}.{key}") from None
    return dict(value)


def _policies(value: object, trial_count: int | None) -> dict[str, Any]:
    where = f"train_args.{POLICIES_KEY}"
    if not isinstance(value, Mapping):
        raise JobOptionsError(f'must be an object like {{"EARLY_STOP": true}}, got {value!r}', field=where)
    known = (*_SEARCH_POLICIES, "final_trials", "final_factor", "final_fraction")
    out: dict[str, Any] = {"policies": set()}
    for key, item in value.items():
        here = f"{where}.{key}"
        if key not in known:
            hint = " (the enas strategy sets it)" if key in (Policy.SKIP_TRAIN, Policy.QUICK_EVAL) else ""
            raise JobOptionsError(f"unknown key {key!r}{hint}; known keys: {', '.join(known)}", field=here)
        if key == Policy.SHARE_PARAMS:
            if item is True or item in _SHARE_FROM:
                out["policies"].add(Policy.SHARE_PARAMS)
                out["share_from"] = "recent" if item is True else item
            elif item is not False:
                raise JobOptionsError(f'must be true, false, "recent" or "best", got {item!r}', field=here)
        elif key in _SEARCH_POLICIES:
            if not isinstance(item, bool):
                raise JobOptionsError(f"must be true or false, got {item!r}", field=here)
            if item:
                out["policies"].add(Policy(key))
        elif key == "final_trials":
            if isinstance(item, bool) or not isinstance(item, int) or item < 1:
                raise JobOptionsError(f"must be a whole number >= 1, got {item!r}", field=here)
            out[key] = item
        elif key == "final_factor":
            if not _number(item) or item < 1:
                raise JobOptionsError(f"must be a number >= 1, got {item!r}", field=here)
            out[key] = float(item)
        else:
            if not _number(item) or not 0 <= item < 1:
                raise JobOptionsError(f"must be a number in [0, 1), got {item!r}", field=here)
            out[key] = float(item)
    reduced = out["policies"] & _REDUCING
    final = out.get("final_trials", 1)
    if reduced and trial_count is not None and trial_count <= final:
        raise JobOptionsError(
            f"MODEL_TRIAL_COUNT={trial_count} leaves no search trial before the {final} final trial(s) that "
            f"{' and '.join(sorted(reduced))} ask for; raise it above {final}",
            field="budget.MODEL_TRIAL_COUNT",
        )
    return out


def parse_job_options(train_args: Mapping[str, Any] | None, *, trial_count: int | None = None) -> JobOptions:
    """The search options in ``train_args`` (see the module docstring), checked.

    Args:
        trial_count: the job's MODEL_TRIAL_COUNT, which must leave room for the final trials.

    Raises:
        JobOptionsError: naming the field at fault.
    """
    train_args = train_args or {}
    values: dict[str, Any] = {}
    if train_args.get(EARLY_STOPPING_KEY) is not None:
        values["stopping_rule"], values["stopping_options"] = _early_stopping(train_args[EARLY_STOPPING_KEY])
    if train_args.get(POLICIES_KEY) is not None:
        parsed = _policies(train_args[POLICIES_KEY], trial_count)
        values["policies"] = frozenset(parsed.pop("policies"))
        values.update(parsed)
    if train_args.get(FUSION_KEY) is not None:
        values.update(_fusion(train_args[FUSION_KEY]))
    if train_args.get(ENAS_KEY) is not None:
        values["enas"] = _enas(train_args[ENAS_KEY])
    return JobOptions(**values)
