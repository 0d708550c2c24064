"""A train job's options get their own column, apart from the arguments of ``train()``.

Revision ID: 0017
Revises: 0016

Until now the options that ask the platform for something (``early_stopping``, ``policies``,
``fusion``, ``enas``, ``warm_start``, ``base_model``) rode inside ``train_jobs.train_args``
and were stripped before ``train()`` saw them. ``train_jobs.options`` now holds them (a JSON
object, see ``baobab.advisor.TrainJobOptions``), and ``train_args`` holds only what
``train()`` receives: the upgrade moves each key present (a null one meant "not set" and is
dropped); the downgrade moves them back, leaving out the options the old form did not have
(``deterministic``) and those at null.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

#: The options that rode in train_args, as revision 0016 knew them.
_MOVED = ("early_stopping", "policies", "fusion", "enas", "warm_start", "base_model")
_JOBS = sa.table(
    "train_jobs", sa.column("id", sa.Integer()), sa.column("train_args", sa.JSON()), sa.column("options", sa.JSON())
)


def _as_dict(value: Any) -> dict[str, Any]:
    """A JSON column's value (a dict, or its text on a driver that returns it as text) as a dict."""
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value or {})


# Plain ALTER TABLE on both databases, as in 0015: a batch would copy train_jobs, which SQLite refuses
# while sub-jobs and inference jobs point at it.
def upgrade() -> None:
    op.add_column("train_jobs", sa.Column("options", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))
    bind = op.get_bind()
    for job_id, train_args in bind.execute(sa.select(_JOBS.c.id, _JOBS.c.train_args)).all():
        args = _as_dict(train_args)
        options = {key: args.pop(key) for key in _MOVED if key in args}
        options = {key: value for key, value in options.items() if value is not None}
        if options or len(args) != len(_as_dict(train_args)):
            bind.execute(sa.update(_JOBS).where(_JOBS.c.id == job_id).values(train_args=args, options=options))


def downgrade() -> None:
    bind = op.get_bind()
    for job_id, train_args, options in bind.execute(sa.select(_JOBS.c.id, _JOBS.c.train_args, _JOBS.c.options)).all():
        moved = {key: value for key, value in _as_dict(options).items() if key in _MOVED and value is not None}
        if isinstance(moved.get("enas"), dict):
            moved["enas"] = {key: value for key, value in moved["enas"].items() if value is not None}
        if moved:
            bind.execute(
                sa.update(_JOBS).where(_JOBS.c.id == job_id).values(train_args={**_as_dict(train_args), **moved})
            )
    op.drop_column("train_jobs", "options")
