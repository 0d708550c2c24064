"""Train jobs keep what the placement planner predicted for them.

Revision ID: 0011
Revises: 0010

``train_jobs.placement`` is null while the job driver places trials by its fixed rules
(``BAOBAB_PLACEMENT=rules``). Under the planner it holds the method, why the planner
fell back to the rules when it did (no completed trial to learn from yet), and the
predictions it made over time: when, the job's predicted finish and the slots' predicted
utilisation. The job page draws them against what happened.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("train_jobs") as batch:
        batch.add_column(sa.Column("placement", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("train_jobs") as batch:
        batch.drop_column("placement")
