"""A trial's fusion profile: the job driver's request to measure, then the worker's measurement.

Under the job option ``fusion: "auto"`` the driver picks one trial per sub-job and
structure to measure how many same-shaped trials one slot should train as one stack
(:func:`baobab.model.profile_fusion`). The request is ``{"max_group": K}``, with a time budget
``"budget_s"`` once the sub-job has a completed trial; the worker
finishes the trial with the request plus what it measured. The measurement comes from
a worker, which runs user code, so :func:`fusion_profile_field` checks it at the
boundary: the driver sizes every later group of the sub-job by ``best``.
"""

from __future__ import annotations

import math
from typing import Any

from baobab.admin._openapi import register_schema
from baobab.advisor import MAX_GROUP
from baobab.exceptions import RequestError

__all__ = ["FUSION_PROFILE_SCHEMA", "fusion_profile_field"]

FUSION_PROFILE_SCHEMA = register_schema(
    "FusionProfile",
    {
        "type": "object",
        "description": 'under fusion "auto", on the trial that measured its structure: the request, then the result',
        "required": ["max_group"],
        "properties": {
            "max_group": {"type": "integer", "minimum": 1, "maximum": MAX_GROUP, "description": "the largest size"},
            "budget_s": {"type": "number", "minimum": 0, "description": "the seconds measuring may take"},
            "samples_per_s": {
                "type": "object",
                "description": "group size (1: unfused) to training rows per second of all members together",
                "additionalProperties": {"type": "number", "minimum": 0},
            },
            "best": {"type": "integer", "minimum": 1, "description": "the group size later trials of it run in"},
            "seconds": {"type": "number", "minimum": 0, "description": "what measuring took"},
            "reason": {"type": ["string", "null"], "description": "why the sizes stopped early, or cannot fuse"},
        },
    },
)

_REQUEST = ("max_group", "budget_s")
_RESULT = ("samples_per_s", "best", "seconds", "reason")


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _rate(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def fusion_profile_field(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    """``body[name]`` as a fusion profile (see :data:`FUSION_PROFILE_SCHEMA`): a request alone, or a
    request with all of its result; None when absent or null.

    Raises:
        RequestError: the profile breaks the schema, or names sizes above its ``max_group``.
    """
    profile = body.get(name)
    if profile is None:
        return None

    def fail(where: str, rule: str) -> RequestError:
        return RequestError(f"{where} {rule}", field=name)

    if not isinstance(profile, dict) or "max_group" not in profile or not set(profile) <= {*_REQUEST, *_RESULT}:
        result = ", ".join(map(repr, _RESULT))
        raise fail(repr(name), f"must be an object with 'max_group' (and 'budget_s') and, once measured, {result}")
    limit = profile["max_group"]
    if not _whole(limit, 1, MAX_GROUP):
        raise fail(f"{name}.max_group", f"must be a whole number from 1 to {MAX_GROUP}")
    if "budget_s" in profile and not _rate(profile["budget_s"]):
        raise fail(f"{name}.budget_s", "must be a number >= 0")
    if not set(profile) & set(_RESULT):
        return profile
    if not set(_RESULT) <= set(profile):
        missing = ", ".join(repr(k) for k in _RESULT if k not in profile)
        raise fail(repr(name), f"has part of a measurement: {missing} missing")
    rates = profile["samples_per_s"]
    if not isinstance(rates, dict):
        raise fail(f"{name}.samples_per_s", "must be an object")
    for size, rate in rates.items():
        if not size.isdigit() or not _whole(int(size), 1, limit) or not _rate(rate):
            raise fail(f"{name}.samples_per_s", f"has {size!r}: {rate!r}; sizes run from 1 to max_group, rates >= 0")
    if profile["best"] != 1 and (not _whole(profile["best"], 1, limit) or str(profile["best"]) not in rates):
        raise fail(f"{name}.best", "must be 1 or one of the sizes measured")
    if not _rate(profile["seconds"]):
        raise fail(f"{name}.seconds", "must be a number >= 0")
    if profile["reason"] is not None and not isinstance(profile["reason"], str):
        raise fail(f"{name}.reason", "must be a string or null")
    return profile
