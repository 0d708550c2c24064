"""The job drivers that share the train jobs, each alive until its row expires.

Revision ID: 0018
Revises: 0017

Several ``baobab advisor`` processes share the train jobs by leases; each also keeps a
row here, renewed with its leases, so that each can count the live ones and take its
fair share of the jobs instead of the first to look taking them all.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "advisors",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_advisors")),
    )
    op.create_index(op.f("ix_advisors_expires_at"), "advisors", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_advisors_expires_at"), table_name="advisors")
    op.drop_table("advisors")
