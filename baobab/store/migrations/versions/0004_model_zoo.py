"""The model zoo: trained models kept to warm-start later trials; a trial's parent and similarity.

Revision ID: 0004
Revises: 0003

``trials.parent_zoo_model_id`` has no foreign key on purpose: retention may evict the
parent, and the trial should still say where it started from.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "zoo_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("access", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("dataset_id", sa.Integer(), nullable=True),
        sa.Column("score", sa.Double(), nullable=False),
        sa.Column("graph", sa.Text(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("io_signature", sa.String(length=255), nullable=False),
        sa.Column("traced", sa.Boolean(), nullable=False),
        sa.Column("node_count", sa.Integer(), nullable=False),
        sa.Column("param_count", sa.BigInteger(), nullable=False),
        sa.Column("params_path", sa.String(length=1024), nullable=False),
        sa.Column("owns_params", sa.Boolean(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("times_chosen", sa.Integer(), nullable=False),
        sa.Column("last_chosen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_zoo_models_owner_id_users"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_zoo_models_trial_id_trials"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_zoo_models_dataset_id_datasets"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_zoo_models")),
        sa.UniqueConstraint("trial_id", name=op.f("uq_zoo_models_trial_id")),
    )
    op.create_index(op.f("ix_zoo_models_owner_id"), "zoo_models", ["owner_id"], unique=False)
    op.create_index(op.f("ix_zoo_models_task_io_signature"), "zoo_models", ["task", "io_signature"], unique=False)
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("parent_zoo_model_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("similarity", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("similarity")
        batch.drop_column("parent_zoo_model_id")
    op.drop_index(op.f("ix_zoo_models_task_io_signature"), table_name="zoo_models")
    op.drop_index(op.f("ix_zoo_models_owner_id"), table_name="zoo_models")
    op.drop_table("zoo_models")
