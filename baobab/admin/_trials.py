"""``/api/v1/trials``: being written."""

from __future__ import annotations

from flask import Blueprint

__all__ = ["blueprint"]

blueprint = Blueprint("trials", __name__, url_prefix="/api/v1/trials")
