"""The admin REST API (Flask, under ``/api/v1``): tokens, users and the resources to come.

Build the app with :func:`create_app`; every endpoint but ``POST /api/v1/tokens`` needs
``Authorization: Bearer <token>``, and every error answers
``{"error": {"code", "message", "field"}}`` with its status. Outside ``/api/v1``, the web UI
and ``GET /metrics`` (Prometheus, :mod:`baobab.admin._telemetry`) need no token.

Names are imported on first use: the upload check runs templates in a child process
started as ``python -m baobab.admin._template_check``, which imports this package first
and should not pay for Flask, SQLAlchemy and pandas (over two seconds) on every upload.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baobab.admin._app import create_app
    from baobab.admin._auth import TOKEN_MAX_AGE_S, hash_password, verify_password

_NAMES = {
    "create_app": "baobab.admin._app",
    "TOKEN_MAX_AGE_S": "baobab.admin._auth",
    "hash_password": "baobab.admin._auth",
    "verify_password": "baobab.admin._auth",
}

__all__ = [
    "TOKEN_MAX_AGE_S",
    "create_app",
    "hash_password",
    "verify_password",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
