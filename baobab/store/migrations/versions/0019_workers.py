"""The worker machines and what each has, as their executor last saw them.

Revision ID: 0019
Revises: 0018

The Celery executor asks each live worker for its cores, memory and GPUs and keeps the
answer here, so that the admin API can refuse a train job that asks for more than any
machine has, naming what the cluster offers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=False),
        sa.Column("devices", sa.JSON(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_workers")),
    )
    op.create_index(op.f("ix_workers_seen_at"), "workers", ["seen_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_workers_seen_at"), table_name="workers")
    op.drop_table("workers")
