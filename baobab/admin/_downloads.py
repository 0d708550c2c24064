"""Sending stored artifacts as the answer: one home for the 404 when the store lost them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import IO, Any

from flask import Response, send_file
from werkzeug.http import dump_options_header

from baobab.admin._state import admin_state
from baobab.exceptions import ArtifactNotFoundError, NotFoundError

__all__ = ["send_artifact", "send_joined_artifacts"]

_CHUNK = 1 << 16


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


def send_joined_artifacts(keys: Sequence[str], *, lost: str, download_name: str, mimetype: str) -> Response:
    """The artifacts ``keys`` one after the other, streamed as one attachment: a file the store keeps in parts.

    A later part deleted while the answer streams (its owner deleted meanwhile) is left out.

    Raises:
        NotFoundError: with the message ``lost``, when the first part is gone already.
    """
    store = admin_state().artifacts  # read here: the stream runs after the request context is gone
    try:
        first = store.open(keys[0])
    except (ArtifactNotFoundError, IndexError):
        raise NotFoundError(lost) from None

    def parts() -> Iterator[IO[Any]]:
        yield first
        for key in keys[1:]:
            try:
                yield store.open(key)
            except ArtifactNotFoundError:
                continue

    def chunks() -> Iterator[bytes]:
        for part in parts():
            with part:
                yield from iter(partial(part.read, _CHUNK), b"")

    disposition = dump_options_header("attachment", {"filename": download_name})
    return Response(chunks(), mimetype=mimetype, headers={"Content-Disposition": disposition})
