"""Trials carry the fusion profile of their sub-job's structure: asked for by the driver, measured by the worker.

Revision ID: 0010
Revises: 0009

``trials.fusion_profile`` is null for every trial but those the job driver picked to
measure how many same-shaped trials one slot should train as one stack (job option
``fusion: "auto"``): it holds the request (``{"max_group": K}``) until the worker's
finish replaces it with the measurement (see ``baobab.model.FusionProfile``). The
driver reads it back as the sub-job's profile for that structure.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("fusion_profile", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("fusion_profile")
