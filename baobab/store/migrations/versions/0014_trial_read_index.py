"""An index for reading the trials of one job: by state, by score.

Revision ID: 0014
Revises: 0013

Every read of a job's trials goes through its sub-jobs (``trials.sub_job_id``). With
``(sub_job_id, status, score)`` PostgreSQL counts a job's trials per state and finds its
best score from the index alone (the job page polls both), narrows a list filtered by
state, and finds the best trials of one state by walking the index backwards instead of
sorting every trial of the job. Measured by ``bench/scale_api.py`` on a 100,000-trial job.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_trials_sub_job_id_status_score"), "trials", ["sub_job_id", "status", "score"])


def downgrade() -> None:
    op.drop_index(op.f("ix_trials_sub_job_id_status_score"), table_name="trials")
