"""What the app keeps for its views: settings, engine, token serializer, artifact store, event channel."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import Engine

from baobab import Settings
from baobab.store import ArtifactStore, EventChannel

__all__ = ["AdminState", "admin_state"]

EXTENSION = "baobab"


@dataclass(frozen=True)
class AdminState:
    """Stored in ``app.extensions["baobab"]`` by :func:`baobab.admin.create_app`."""

    settings: Settings
    engine: Engine
    tokens: URLSafeTimedSerializer
    artifacts: ArtifactStore
    events: EventChannel


def admin_state() -> AdminState:
    """The state of the app handling the current request."""
    return current_app.extensions[EXTENSION]
