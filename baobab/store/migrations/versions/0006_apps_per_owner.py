"""Apps belong to their owner: a train job is version ``app_version`` of ``(owner_id, app)``.

Revision ID: 0006
Revises: 0005

Two users may use one app name; each counts their own versions from 1. The unique
``(app, app_version)`` becomes ``(owner_id, app, app_version)``, which every existing
row satisfies, since it is looser.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("train_jobs") as batch:
        batch.drop_constraint(op.f("uq_train_jobs_app_app_version"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_train_jobs_owner_id_app_app_version"), ["owner_id", "app", "app_version"]
        )


def downgrade() -> None:
    """Fails with an IntegrityError where two owners hold the same version of one app name."""
    with op.batch_alter_table("train_jobs") as batch:
        batch.drop_constraint(op.f("uq_train_jobs_owner_id_app_app_version"), type_="unique")
        batch.create_unique_constraint(op.f("uq_train_jobs_app_app_version"), ["app", "app_version"])
