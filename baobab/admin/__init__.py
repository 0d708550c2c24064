"""The admin REST API (Flask, under ``/api/v1``): tokens, users and the resources to come.

Build the app with :func:`create_app`; every endpoint but ``POST /api/v1/tokens`` needs
``Authorization: Bearer <token>``, and every error answers
``{"error": {"code", "message", "field"}}`` with its status.
"""

from __future__ import annotations

from baobab.admin._app import create_app
from baobab.admin._auth import TOKEN_MAX_AGE_S, hash_password, verify_password

__all__ = [
    "TOKEN_MAX_AGE_S",
    "create_app",
    "hash_password",
    "verify_password",
]
