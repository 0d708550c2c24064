"""An inference job serves versions: named sets of trials with traffic weights, kept per revision.

Revision ID: 0013
Revises: 0012

``inference_revisions`` holds each wanted state of a job's versions (a change adds one,
so a rollback can go back); ``inference_versions`` the versions of a revision, with their
weights; ``inference_members`` now belongs to a version instead of a job.
``inference_jobs.revision`` is the wanted revision (the predictor polls it),
``served_revision`` the one its predictor serves; ``inference_revisions.error`` says why
the predictor could not serve a revision.

Every existing job becomes revision 1 with one version ``v1`` of weight 1 holding its
members, as a job created now starts. The downgrade keeps each job's members of its
wanted revision (all its versions' trials).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# What the members are copied through while their table is made again (its key changes).
_COPY = "inference_members_copy"


def upgrade() -> None:
    with op.batch_alter_table("inference_jobs") as batch:
        batch.add_column(sa.Column("revision", sa.Integer(), server_default="1", nullable=False))
        batch.add_column(sa.Column("served_revision", sa.Integer(), nullable=True))
    op.create_table(
        "inference_revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("inference_job_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("parent", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["inference_job_id"],
            ["inference_jobs.id"],
            name=op.f("fk_inference_revisions_inference_job_id_inference_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inference_revisions")),
        sa.UniqueConstraint("inference_job_id", "number", name=op.f("uq_inference_revisions_inference_job_id_number")),
    )
    op.create_table(
        "inference_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["revision_id"],
            ["inference_revisions.id"],
            name=op.f("fk_inference_versions_revision_id_inference_revisions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inference_versions")),
        sa.UniqueConstraint("revision_id", "name", name=op.f("uq_inference_versions_revision_id_name")),
    )
    op.execute(
        "INSERT INTO inference_revisions (inference_job_id, number, action, parent, created_at) "
        "SELECT id, 1, 'CREATE', NULL, created_at FROM inference_jobs"
    )
    op.execute(
        "INSERT INTO inference_versions (revision_id, position, name, weight) "
        "SELECT id, 0, 'v1', 1.0 FROM inference_revisions"
    )
    op.execute(
        f"CREATE TABLE {_COPY} AS SELECT v.id AS version_id, m.trial_id AS trial_id FROM inference_members m "
        "JOIN inference_revisions r ON r.inference_job_id = m.inference_job_id "
        "JOIN inference_versions v ON v.revision_id = r.id"
    )
    op.drop_table("inference_members")
    _create_members(
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["inference_versions.id"],
            name=op.f("fk_inference_members_version_id_inference_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version_id", "trial_id", name=op.f("pk_inference_members")),
    )
    op.create_index(op.f("ix_inference_members_trial_id"), "inference_members", ["trial_id"], unique=False)
    op.execute(f"INSERT INTO inference_members (version_id, trial_id) SELECT version_id, trial_id FROM {_COPY}")
    op.drop_table(_COPY)


def downgrade() -> None:
    op.execute(
        f"CREATE TABLE {_COPY} AS SELECT DISTINCT r.inference_job_id AS inference_job_id, m.trial_id AS trial_id "
        "FROM inference_members m JOIN inference_versions v ON v.id = m.version_id "
        "JOIN inference_revisions r ON r.id = v.revision_id "
        "JOIN inference_jobs j ON j.id = r.inference_job_id AND j.revision = r.number"
    )
    op.drop_index(op.f("ix_inference_members_trial_id"), table_name="inference_members")
    op.drop_table("inference_members")
    op.drop_table("inference_versions")
    op.drop_table("inference_revisions")
    # Before anything refers to inference_jobs again: SQLite's batch mode copies the table and
    # drops the old one, which would cascade to the members.
    with op.batch_alter_table("inference_jobs") as batch:
        batch.drop_column("served_revision")
        batch.drop_column("revision")
    _create_members(
        sa.Column("inference_job_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["inference_job_id"],
            ["inference_jobs.id"],
            name=op.f("fk_inference_members_inference_job_id_inference_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("inference_job_id", "trial_id", name=op.f("pk_inference_members")),
    )
    op.execute(
        f"INSERT INTO inference_members (inference_job_id, trial_id) SELECT inference_job_id, trial_id FROM {_COPY}"
    )
    op.drop_table(_COPY)


def _create_members(owner: sa.Column[int], owner_key: sa.ForeignKeyConstraint, key: sa.PrimaryKeyConstraint) -> None:
    """``inference_members`` with its trial column and the given owner column (a version, or a job before 0012)."""
    op.create_table(
        "inference_members",
        owner,
        sa.Column("trial_id", sa.Integer(), nullable=False),
        owner_key,
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_inference_members_trial_id_trials"), ondelete="RESTRICT"
        ),
        key,
    )
