"""Search policies: a trial's phase, the parameters it starts from, and whether it may be served.

Revision ID: 0005
Revises: 0004

``trials.servable`` is false for trials that ran downscaled, on part of the validation
set or without training (DOWNSCALE, QUICK_EVAL, SKIP_TRAIN): their score and parameters
are not those of a full model, so the best-trial listing and inference jobs pass them by.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("phase", sa.String(32), nullable=True))
        batch.add_column(sa.Column("shared_params_path", sa.String(1024), nullable=True))
        batch.add_column(sa.Column("servable", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("servable")
        batch.drop_column("shared_params_path")
        batch.drop_column("phase")
