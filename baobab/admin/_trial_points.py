"""A job's trials as the job page's charts read them (``trials/changes``), each row made into JSON by the database.

A 100,000-trial job's points are 100,000 rows: built as Python objects (JSON columns
parsed, times converted, dicts encoded again) they took 75 ms a thousand; the database
writes each row's JSON array in C, and Python only joins the texts (``bench/scale_api.py``
measures both). The knobs and policies go through as the JSON they are stored as.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Numeric, Text, cast, extract, func, select
from sqlalchemy.orm import Session

from baobab.store import SubJob, Trial

__all__ = ["POINT_FIELDS", "point_rows"]

#: What each point's array holds, in order; ``finished_at`` in seconds since the epoch (ms precision).
POINT_FIELDS = ("id", "number", "model_id", "status", "score", "finished_at", "knobs", "policies")


def point_rows(
    session: Session, train_job_id: int, where: Sequence[ColumnElement[bool]], *, limit: int | None = None
) -> list[tuple[int, str]]:
    """``(id, JSON array text)`` of the job's trials that match ``where``, by id, at most ``limit``."""
    if session.get_bind().dialect.name == "postgresql":
        finished: Any = func.round(cast(extract("epoch", Trial.finished_at), Numeric), 3)
        point: Any = func.json_build_array(
            Trial.id, Trial.number, SubJob.model_template_id, Trial.status, Trial.score, finished, Trial.knobs,
            Trial.policies,
        )  # fmt: skip
    else:  # SQLite keeps times as UTC text and JSON as text
        finished = func.round((func.julianday(Trial.finished_at) - 2440587.5) * 86400.0, 3)
        point = func.json_array(
            Trial.id, Trial.number, SubJob.model_template_id, Trial.status, Trial.score, finished,
            func.json(Trial.knobs), func.json(Trial.policies),
        )  # fmt: skip
    query = (
        select(Trial.id, cast(point, Text))
        .join(Trial.sub_job)
        .where(SubJob.train_job_id == train_job_id, *where)
        .order_by(Trial.id)
    )
    if limit is not None:
        query = query.limit(limit)
    return [(trial_id, text) for trial_id, text in session.execute(query)]
