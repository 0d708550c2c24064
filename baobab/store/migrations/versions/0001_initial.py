"""The first schema: users, datasets, model templates, train jobs and their trials, inference jobs.

Revision ID: 0001
Revises: (none)

Written from Alembic's autogenerate output, then reviewed: states are plain
VARCHAR(32) columns holding enum values (no native enums, no CHECK constraints), and
times are timezone-aware. Revisions use only ``sqlalchemy`` and ``alembic``, never
Baobab's own types, so that later changes to those cannot change history.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("banned", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("format", sa.String(length=32), nullable=False),
        sa.Column("artifact_path", sa.String(length=1024), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_datasets_owner_id_users"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
    )
    op.create_index(op.f("ix_datasets_owner_id"), "datasets", ["owner_id"], unique=False)
    op.create_table(
        "model_templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("task", sa.String(length=32), nullable=False),
        sa.Column("class_name", sa.String(length=255), nullable=False),
        sa.Column("artifact_path", sa.String(length=1024), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("dependencies", sa.JSON(), nullable=False),
        sa.Column("access", sa.String(length=32), nullable=False),
        sa.Column("knob_config", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_model_templates_owner_id_users"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_templates")),
    )
    op.create_index(op.f("ix_model_templates_owner_id"), "model_templates", ["owner_id"], unique=False)
    op.create_table(
        "train_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("app", sa.String(length=255), nullable=False),
        sa.Column("app_version", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=32), nullable=False),
        sa.Column("train_dataset_id", sa.Integer(), nullable=False),
        sa.Column("val_dataset_id", sa.Integer(), nullable=False),
        sa.Column("budget", sa.JSON(), nullable=False),
        sa.Column("train_args", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_train_jobs_owner_id_users"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["train_dataset_id"],
            ["datasets.id"],
            name=op.f("fk_train_jobs_train_dataset_id_datasets"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["val_dataset_id"], ["datasets.id"], name=op.f("fk_train_jobs_val_dataset_id_datasets"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_train_jobs")),
        sa.UniqueConstraint("app", "app_version", name=op.f("uq_train_jobs_app_app_version")),
    )
    op.create_index(op.f("ix_train_jobs_owner_id"), "train_jobs", ["owner_id"], unique=False)
    op.create_table(
        "inference_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("train_job_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("api_key_hash", sa.String(length=255), nullable=True),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("predictor_url", sa.String(length=1024), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_inference_jobs_owner_id_users"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["train_job_id"],
            ["train_jobs.id"],
            name=op.f("fk_inference_jobs_train_job_id_train_jobs"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inference_jobs")),
    )
    op.create_index(op.f("ix_inference_jobs_owner_id"), "inference_jobs", ["owner_id"], unique=False)
    op.create_index(op.f("ix_inference_jobs_train_job_id"), "inference_jobs", ["train_job_id"], unique=False)
    op.create_table(
        "sub_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("train_job_id", sa.Integer(), nullable=False),
        sa.Column("model_template_id", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=64), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_template_id"],
            ["model_templates.id"],
            name=op.f("fk_sub_jobs_model_template_id_model_templates"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["train_job_id"], ["train_jobs.id"], name=op.f("fk_sub_jobs_train_job_id_train_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sub_jobs")),
    )
    op.create_index(op.f("ix_sub_jobs_train_job_id"), "sub_jobs", ["train_job_id"], unique=False)
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sub_job_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("knobs", sa.JSON(), nullable=False),
        sa.Column("policies", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("score", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.Column("params_path", sa.String(length=1024), nullable=True),
        sa.ForeignKeyConstraint(
            ["sub_job_id"], ["sub_jobs.id"], name=op.f("fk_trials_sub_job_id_sub_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trials")),
        sa.UniqueConstraint("sub_job_id", "number", name=op.f("uq_trials_sub_job_id_number")),
    )
    op.create_index(op.f("ix_trials_status"), "trials", ["status"], unique=False)
    op.create_table(
        "inference_members",
        sa.Column("inference_job_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["inference_job_id"],
            ["inference_jobs.id"],
            name=op.f("fk_inference_members_inference_job_id_inference_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_inference_members_trial_id_trials"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("inference_job_id", "trial_id", name=op.f("pk_inference_members")),
    )
    op.create_table(
        "interim_metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_interim_metrics_trial_id_trials"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_interim_metrics")),
    )
    op.create_index(op.f("ix_interim_metrics_trial_id_step"), "interim_metrics", ["trial_id", "step"], unique=False)
    op.create_table(
        "trial_logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["trials.id"], name=op.f("fk_trial_logs_trial_id_trials"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trial_logs")),
    )
    op.create_index(op.f("ix_trial_logs_trial_id"), "trial_logs", ["trial_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_trial_logs_trial_id"), table_name="trial_logs")
    op.drop_table("trial_logs")
    op.drop_index(op.f("ix_interim_metrics_trial_id_step"), table_name="interim_metrics")
    op.drop_table("interim_metrics")
    op.drop_table("inference_members")
    op.drop_index(op.f("ix_trials_status"), table_name="trials")
    op.drop_table("trials")
    op.drop_index(op.f("ix_sub_jobs_train_job_id"), table_name="sub_jobs")
    op.drop_table("sub_jobs")
    op.drop_index(op.f("ix_inference_jobs_train_job_id"), table_name="inference_jobs")
    op.drop_index(op.f("ix_inference_jobs_owner_id"), table_name="inference_jobs")
    op.drop_table("inference_jobs")
    op.drop_index(op.f("ix_train_jobs_owner_id"), table_name="train_jobs")
    op.drop_table("train_jobs")
    op.drop_index(op.f("ix_model_templates_owner_id"), table_name="model_templates")
    op.drop_table("model_templates")
    op.drop_index(op.f("ix_datasets_owner_id"), table_name="datasets")
    op.drop_table("datasets")
    op.drop_table("users")
