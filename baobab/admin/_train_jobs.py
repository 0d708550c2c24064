"""``/api/v1/train_jobs``: being written."""

from __future__ import annotations

from flask import Blueprint

__all__ = ["blueprint"]

blueprint = Blueprint("train_jobs", __name__, url_prefix="/api/v1/train_jobs")
