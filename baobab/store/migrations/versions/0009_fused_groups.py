"""Trials remember the fused group they were submitted in.

Revision ID: 0009
Revises: 0008

``trials.fused_group`` is the id of the group's first trial, the same on every member, and
null for a trial run alone (every trial before this revision). Indexed: a trial's page
lists its group-mates.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("fused_group", sa.Integer(), nullable=True))
        batch.create_index(batch.f("ix_trials_fused_group"), ["fused_group"])


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_index(batch.f("ix_trials_fused_group"))
        batch.drop_column("fused_group")
