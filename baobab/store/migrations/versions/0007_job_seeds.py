"""A train job keeps its seed: every sub-job's seed derives from it, so a job can be repeated.

Revision ID: 0007
Revises: 0006

``train_jobs.seed`` is nullable: jobs made before it have sub-job seeds of their own and
no job seed to show.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("train_jobs") as batch:
        batch.add_column(sa.Column("seed", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("train_jobs") as batch:
        batch.drop_column("seed")
