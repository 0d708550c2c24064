"""Which trials an inference job may serve: the one rule for creating a job and for setting its versions.

A trial is served by id only when it is trained for good: COMPLETED or STOPPED (a
STOPPED one named by id is asked for), with parameters stored, and not run with a
policy that makes it no final model (downscaled, quick-evaluated, untrained).
"""

from __future__ import annotations

from typing import Any

from baobab.admin._query import MAX_ID
from baobab.exceptions import RequestError
from baobab.store import Trial

__all__ = ["MAX_MEMBERS", "TRIAL_IDS_SCHEMA", "check_servable", "trial_id_list"]

MAX_MEMBERS = 20  # each member is a model loaded in its own inference worker process
#: What :func:`trial_id_list` accepts, as the OpenAPI document shows it.
TRIAL_IDS_SCHEMA = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
    "minItems": 1,
    "maxItems": MAX_MEMBERS,
    "uniqueItems": True,
}


def trial_id_list(value: Any, field: str, *, hint: str) -> list[int]:
    """``value``, the body field ``field``: a non-empty array of at most :data:`MAX_MEMBERS` distinct trial ids.

    Args:
        hint: how else the caller may ask, added to the message of a value that is not a list.

    Raises:
        RequestError: naming ``field``, or ``field[i]`` for a bad id.
    """
    if not isinstance(value, list) or not value:
        raise RequestError(f"{field!r} must be a non-empty array of trial ids, got {value!r}{hint}", field=field)
    if len(value) > MAX_MEMBERS:
        raise RequestError(f"{field!r} has {len(value)} ids, at most {MAX_MEMBERS} are allowed", field=field)
    seen: dict[int, int] = {}
    for index, trial_id in enumerate(value):
        at = f"{field}[{index}]"
        if not isinstance(trial_id, int) or isinstance(trial_id, bool):
            raise RequestError(f"{at} must be an integer trial id, got {trial_id!r}", field=at)
        if not 1 <= trial_id <= MAX_ID:  # names no row (and would overflow SQLite's integers)
            raise RequestError(f"{at}: there is no trial with id {trial_id}", field=at)
        if trial_id in seen:
            raise RequestError(f"{at}: trial {trial_id} is already {field}[{seen[trial_id]}]", field=at)
        seen[trial_id] = index
    return value


def check_servable(trial: Trial, field: str) -> None:
    """Refuse ``trial`` (named by the request field ``field``) unless it is a final, trained model.

    Raises:
        RequestError: naming ``field`` and why the trial cannot be served.
    """
    if not trial.status.is_scored():
        raise RequestError(
            f"{field}: trial {trial.id} is {trial.status.value}; only COMPLETED or STOPPED trials can be served",
            field=field,
        )
    if trial.params_path is None:
        raise RequestError(
            f"{field}: trial {trial.id} is {trial.status.value} but stored no parameters, so it cannot be served",
            field=field,
        )
    if not trial.servable:
        raise RequestError(
            f"{field}: trial {trial.id} ran with {', '.join(k for k, v in trial.policies.items() if v)} "
            "(downscaled, quick-evaluated or untrained), so it is not a final model and cannot be served",
            field=field,
        )
