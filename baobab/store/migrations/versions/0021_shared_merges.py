"""Shared weights that add two trials' trainings up are recorded as data, not read from their file name.

Revision ID: 0021
Revises: 0020

When shared trainings that ran at once add up (ENAS), the driver writes one trial's update
added onto the weights another trial left, at an artifact key that named both
(``params/trial-7-shared-onto-5.safetensors``), and a trial's lineage parsed the key back.
``shared_merges`` now says it: the key, the trial whose update the weights hold, and the
trial (and its number) onto whose shared weights. The upgrade records the merges that trials
started from, reading the old keys one last time; the downgrade drops the table (the keys
still name both trials).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

#: What the driver's keys added to the trial's own parameters key, before the number merged onto.
_ONTO = "-shared-onto-"
_TRIALS = sa.table(
    "trials",
    sa.column("id", sa.Integer()),
    sa.column("sub_job_id", sa.Integer()),
    sa.column("number", sa.Integer()),
    sa.column("params_path", sa.String()),
    sa.column("shared_params_path", sa.String()),
)


def _parse(key: str) -> tuple[str, int] | None:
    """The old key format: (the update's trial's parameters key, the number merged onto); None for another key."""
    head, sep, tail = key.rpartition(_ONTO)
    number, dot, ext = tail.partition(".")
    if not sep or not number.isdigit() or "/" in tail:
        return None
    return (f"{head}.{ext}" if dot else head), int(number)


def upgrade() -> None:
    merges = op.create_table(
        "shared_merges",
        sa.Column("key", sa.String(length=1024), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("onto_trial_id", sa.Integer(), nullable=True),
        sa.Column("onto_number", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_shared_merges_trial_id_trials"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["onto_trial_id"], ["trials.id"], name=op.f("fk_shared_merges_onto_trial_id_trials"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_shared_merges")),
    )
    op.create_index(op.f("ix_shared_merges_trial_id"), "shared_merges", ["trial_id"])
    bind = op.get_bind()
    started = bind.execute(
        sa.select(_TRIALS.c.shared_params_path).where(_TRIALS.c.shared_params_path.like(f"%{_ONTO}%")).distinct()
    ).scalars()
    rows = []
    for key in started:
        parsed = _parse(key)
        if parsed is None:
            continue
        params, onto = parsed
        update = bind.execute(
            sa.select(_TRIALS.c.id, _TRIALS.c.sub_job_id).where(_TRIALS.c.params_path == params).limit(1)
        ).first()
        if update is None:
            continue
        onto_id = bind.execute(
            sa.select(_TRIALS.c.id).where(_TRIALS.c.sub_job_id == update.sub_job_id, _TRIALS.c.number == onto)
        ).scalar()
        rows.append({"key": key, "trial_id": update.id, "onto_trial_id": onto_id, "onto_number": onto})
    if rows:
        op.bulk_insert(merges, rows)


def downgrade() -> None:
    op.drop_index(op.f("ix_shared_merges_trial_id"), table_name="shared_merges")
    op.drop_table("shared_merges")
