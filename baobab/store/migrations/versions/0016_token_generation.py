"""Token generations, and failed-login counters.

Revision ID: 0016
Revises: 0015

``users.token_generation`` is carried in every bearer token; a ban or a role change
raises it, so the tokens issued before stop working (an unbanned user logs in again).
``login_failures`` counts failed logins per account and per client address in a fixed
window, in the metadata store so that every API process counts against one limit.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("users", sa.Column("token_generation", sa.Integer(), nullable=False, server_default=sa.text("0")))
    op.create_table(
        "login_failures",
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("window_started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_login_failures")),
    )
    op.create_index(op.f("ix_login_failures_window_started_at"), "login_failures", ["window_started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_login_failures_window_started_at"), table_name="login_failures")
    op.drop_table("login_failures")
    # Not in batch mode: on SQLite that copies the users table, and dropping the old one
    # breaks every foreign key that points at it. SQLite drops a plain column in place.
    op.drop_column("users", "token_generation")
