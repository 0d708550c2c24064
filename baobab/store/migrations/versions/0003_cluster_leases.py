"""Cluster mode: advisor leases on jobs; when a trial was last handed out and why it is asked to stop.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_LEASED = ("train_jobs", "inference_jobs")


def upgrade() -> None:
    for table in _LEASED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("driver", sa.String(255), nullable=True))
            batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("stop_reason")
        batch.drop_column("submitted_at")
    for table in reversed(_LEASED):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("lease_expires_at")
            batch.drop_column("driver")
