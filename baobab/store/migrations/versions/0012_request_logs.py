"""Inference jobs may log a sample of the requests they answer.

Revision ID: 0012
Revises: 0011

``inference_jobs.request_log_rate`` is the share of answered requests the predictor
writes to the artifact store (see ``baobab/store/_request_logs.py``); jobs made before
it log nothing (0).

Plain ``ALTER TABLE``, not batch mode: on SQLite batch mode copies the table and drops the
old one, and the drop would cascade to every inference job's members.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "inference_jobs", sa.Column("request_log_rate", sa.Double(), nullable=False, server_default=sa.text("0"))
    )


def downgrade() -> None:
    op.drop_column("inference_jobs", "request_log_rate")
