"""Trials keep the GPU memory they needed: the peak of their CUDA allocator and their device's total.

Revision ID: 0022
Revises: 0021

``trials.gpu_memory`` is null for a trial that ran on no GPU; a worker that ran one on a GPU
stores ``{"peak_mb": ..., "total_mb": ...}`` with its final state. The driver reads it to
decide how many of a job's trials may share a GPU (``resources.gpu_share``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, as 0015's: a batch would copy the trials table, which SQLite refuses while rows point at it.
def upgrade() -> None:
    op.add_column("trials", sa.Column("gpu_memory", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("trials", "gpu_memory")
