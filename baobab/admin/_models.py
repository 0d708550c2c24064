"""``/api/v1/models``: being written."""

from __future__ import annotations

from flask import Blueprint

__all__ = ["blueprint"]

blueprint = Blueprint("models", __name__, url_prefix="/api/v1/models")
