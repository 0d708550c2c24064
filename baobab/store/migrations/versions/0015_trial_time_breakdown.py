"""Trials keep where their time went: seconds per phase of their run.

Revision ID: 0015
Revises: 0014

``trials.time_breakdown`` is null until a worker finishes the trial; then it holds the
seconds the run spent in each phase it reached (loading template and data, warm start, fusion
profiling, building, training, evaluation, saving parameters: ``baobab.enums.TimePhase``).
Waiting for a slot is not stored: ``created_at`` and ``started_at`` give it. A job's time
breakdown (``GET /api/v1/train_jobs/<id>/time_breakdown``) sums them over its trials.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases (SQLite has dropped columns since 3.35): a batch would copy
# the trials table, which SQLite refuses while rows of other tables (inference members) point at it.
def upgrade() -> None:
    op.add_column("trials", sa.Column("time_breakdown", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("trials", "time_breakdown")
