"""``/api/v1``: being written."""

from __future__ import annotations

from flask import Blueprint

__all__ = ["blueprint"]

blueprint = Blueprint("openapi", __name__, url_prefix="/api/v1")
