"""Sending a stored artifact as the answer: one home for the 404 when the store lost it."""

from __future__ import annotations

from flask import Response, send_file

from baobab.admin._state import admin_state
from baobab.exceptions import ArtifactNotFoundError, NotFoundError

__all__ = ["send_artifact"]


def send_artifact(key: str, *, lost: str, download_name: str | None = None) -> Response:
    """The artifact ``key`` as ``application/octet-stream``, streamed; an attachment when ``download_name`` is given.

    Raises:
        NotFoundError: with the message ``lost``: the row names an artifact that was deleted
            behind the database's back (say so without the storage key).
    """
    try:
        stream = admin_state().artifacts.open(key)
    except ArtifactNotFoundError:
        raise NotFoundError(lost) from None
    return send_file(
        stream,
        mimetype="application/octet-stream",
        as_attachment=download_name is not None,
        download_name=download_name,
        conditional=False,
    )
