"""A tabular train job's target column gets its own column, apart from the arguments of ``train()``.

Revision ID: 0020
Revises: 0019

Until now the target column of a tabular job's datasets rode in ``train_jobs.train_args`` as
``target``, and the worker, the predictor and the dev runner each read it from there with the
same default. ``train_jobs.target`` now holds it (``train()`` still receives it as its
``target`` argument). The upgrade moves the key out of the ``train_args`` of the jobs of
tabular tasks, where the API reads it as the column; an image job's ``target`` is one more
argument of its ``train()`` and stays, as does a value the column cannot hold (not a string,
blank, or over 255 characters), which ``train()`` receives as before. The downgrade moves the
column back into ``train_args``.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: The tasks whose jobs read a target column, as revision 0019 knew them.
_TABULAR = ("TABULAR_CLASSIFICATION", "TABULAR_REGRESSION")
_MAX_LENGTH = 255
_JOBS = sa.table(
    "train_jobs",
    sa.column("id", sa.Integer()),
    sa.column("task", sa.String()),
    sa.column("train_args", sa.JSON()),
    sa.column("target", sa.String()),
)


def _as_dict(value: Any) -> dict[str, Any]:
    """A JSON column's value (a dict, or its text on a driver that returns it as text) as a dict."""
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value or {})


def _movable(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and len(value) <= _MAX_LENGTH


# Plain ALTER TABLE on both databases, as in 0015 and 0017: a batch would copy train_jobs, which SQLite
# refuses while sub-jobs and inference jobs point at it.
def upgrade() -> None:
    op.add_column("train_jobs", sa.Column("target", sa.String(length=_MAX_LENGTH), nullable=True))
    bind = op.get_bind()
    tabular = sa.select(_JOBS.c.id, _JOBS.c.train_args).where(_JOBS.c.task.in_(_TABULAR))
    for job_id, train_args in bind.execute(tabular).all():
        args = _as_dict(train_args)
        if _movable(args.get("target")):
            target = args.pop("target")
            bind.execute(sa.update(_JOBS).where(_JOBS.c.id == job_id).values(train_args=args, target=target))


def downgrade() -> None:
    bind = op.get_bind()
    named = sa.select(_JOBS.c.id, _JOBS.c.train_args, _JOBS.c.target).where(_JOBS.c.target.is_not(None))
    for job_id, train_args, target in bind.execute(named).all():
        bind.execute(
            sa.update(_JOBS).where(_JOBS.c.id == job_id).values(train_args={**_as_dict(train_args), "target": target})
        )
    op.drop_column("train_jobs", "target")
