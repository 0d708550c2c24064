"""A trial's lineage as the API shows it: where its starting weights came from, as far as the caller may see.

The chain may pass through other users' PUBLIC zoo models and so through their trials.
An ancestor the caller may not see (by the rules of :mod:`baobab.admin._access`) shows
as ``{"hidden": true}``; its epochs still count in ``inherited_epochs``, so the total
says how much training the model carries even where the caller cannot follow it. Only
``GET /trials/<id>`` answers with a lineage: it costs a recursive query per trial (one more
per merge of shared trainings on the chain, which the driver records in the store).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from baobab.admin._access import may_see_shared
from baobab.admin._openapi import register_schema
from baobab.store import User
from baobab.zoo import MAX_DEPTH, Ancestor, trial_lineage

__all__ = ["LINEAGE_SCHEMA", "lineage_json"]

_ANCESTOR = {
    "type": "object",
    "required": [
        "via", "source", "trial_id", "number", "train_job_id", "app", "app_version", "zoo_model_id", "similarity",
        "epochs", "phase", "merged_onto",
    ],
    "additionalProperties": False,
    "properties": {
        "via": {
            "enum": ["zoo", "shared_params"],
            "description": "how its child started from it: a zoo model, or shared parameters (SHARE_PARAMS)",
        },
        "source": {
            "enum": ["trial", "upload", "removed", "merged"],
            "description": (
                "a trial's model; a zoo model uploaded outside a job; one gone since; or shared weights that "
                "hold this trial's update added onto those merged_onto left (shared trainings that ran at once)"
            ),
        },
        "trial_id": {"type": ["integer", "null"]},
        "number": {"type": ["integer", "null"], "description": "the trial's number in its job"},
        "train_job_id": {"type": ["integer", "null"]},
        "app": {"type": ["string", "null"], "description": "the trial's job's app"},
        "app_version": {"type": ["integer", "null"]},
        "zoo_model_id": {"type": ["integer", "null"], "description": "the zoo model the link passed through"},
        "similarity": {"type": ["number", "null"], "description": "of the child to this zoo model"},
        "epochs": {"type": ["integer", "null"], "minimum": 0, "description": "null when unknown (not a trial)"},
        "phase": {"type": ["string", "null"], "description": "the search phase the ancestor ran in"},
        "merged_onto": {
            "type": ["object", "null"],
            "required": ["trial_id", "number"],
            "additionalProperties": False,
            "properties": {
                "trial_id": {"type": ["integer", "null"], "description": "null when that trial is gone"},
                "number": {"type": "integer", "description": "its number in the merged trial's sub-job"},
            },
            "description": "a merge only: the trial whose shared weights this trial's update was added onto",
        },
    },
}  # fmt: skip

LINEAGE_SCHEMA = register_schema(
    "TrialLineage",
    {
        "type": "object",
        "required": ["from", "chain", "inherited_epochs", "truncated"],
        "additionalProperties": False,
        "properties": {
            "from": {
                "enum": ["scratch", "zoo", "shared_params"],
                "description": "where the trial's own training started",
            },
            "chain": {
                "type": "array",
                "maxItems": MAX_DEPTH + 1,
                "description": "the ancestors, nearest first; one the caller may not see is {hidden: true}",
                "items": {
                    "oneOf": [
                        _ANCESTOR,
                        {
                            "type": "object",
                            "required": ["hidden"],
                            "additionalProperties": False,
                            "properties": {"hidden": {"const": True}},
                        },
                    ]
                },
            },
            "inherited_epochs": {
                "type": "integer",
                "minimum": 0,
                "description": (
                    "epochs trained up the chain (hidden ancestors included, unknown ones as 0, a merge's "
                    "merged_onto trial not counted)"
                ),
            },
            "truncated": {"type": "boolean", "description": f"the chain goes on past {MAX_DEPTH} ancestors"},
        },
    },
)


def lineage_json(session: Session, trial_id: int, user: User) -> dict[str, Any]:
    """The lineage of trial ``trial_id`` (which ``user`` may see), its ancestors shown as far as ``user`` may."""
    lineage = trial_lineage(session, trial_id)
    chain: list[dict[str, Any]] = []
    child_seen = True  # the trial itself
    for ancestor in lineage.chain:
        # A removed ancestor tells no more than its child's row, which is shown when the child is.
        seen = child_seen if ancestor.source == "removed" else may_see_shared(user, ancestor)
        chain.append(_ancestor_json(ancestor) if seen else {"hidden": True})
        child_seen = seen
    return {
        "from": lineage.start,
        "chain": chain,
        "inherited_epochs": lineage.inherited_epochs,
        "truncated": lineage.truncated,
    }


def _ancestor_json(ancestor: Ancestor) -> dict[str, Any]:
    return {
        "via": ancestor.via,
        "source": ancestor.source,
        "trial_id": ancestor.trial_id,
        "number": ancestor.number,
        "train_job_id": ancestor.train_job_id,
        "app": ancestor.app,
        "app_version": ancestor.app_version,
        "zoo_model_id": ancestor.zoo_model_id,
        "similarity": ancestor.similarity,
        "epochs": ancestor.epochs,
        "phase": ancestor.phase,
        "merged_onto": None
        if ancestor.merged_onto_number is None
        else {"trial_id": ancestor.merged_onto, "number": ancestor.merged_onto_number},
    }
