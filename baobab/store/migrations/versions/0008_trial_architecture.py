"""A SpaceModel trial keeps its architecture: the mutation record of the instance it trained.

Revision ID: 0008
Revises: 0007

``trials.architecture`` is nullable: trials of ordinary templates have none, and neither
have trials that finished before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("architecture", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("architecture")
