"""The web UI: the single-page app built from ``web/`` (Vite), served at ``/``.

``make install`` builds it into ``baobab/admin/web_dist`` (package data, so an editable
install and a wheel both carry it); the app config key :data:`WEB_DIR_CONFIG` points
elsewhere (tests do). A path that names a built file gets that file; any other path
gets ``index.html``, so that the app's own routes (``/jobs/fraud/3``) survive a reload
or a shared link. Nothing under ``/api`` is ever answered here: the route's converter
refuses those paths, so an unknown API path still answers the API's JSON 404 or 405.

The pages need no token (the app signs in through the API); files under ``assets/``
carry a content hash in their names and are cached for a year, ``index.html`` never.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, current_app, send_from_directory
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import NotFound
from werkzeug.routing import PathConverter

from baobab.admin._auth import public

__all__ = ["WEB_DIR_CONFIG", "blueprint", "web_dir"]

#: ``app.config`` key: the folder with the built web UI (default: the package's ``web_dist``).
WEB_DIR_CONFIG = "BAOBAB_WEB_DIR"

_DEFAULT_DIR = Path(__file__).parent / "web_dist"
_INDEX = "index.html"
_IMMUTABLE_PREFIX = "assets/"
_YEAR_S = 365 * 24 * 3600


class _PagePath(PathConverter):
    """A path that does not start with ``api`` (the API's own 404 and 405 must stay in charge there)."""

    regex = r"(?!api(?:/|$))[^/].*?"


blueprint = Blueprint("web", __name__)


@blueprint.record_once
def _add_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters["page_path"] = _PagePath


def web_dir() -> Path:
    """The folder the UI is served from (see :data:`WEB_DIR_CONFIG`)."""
    configured = current_app.config.get(WEB_DIR_CONFIG)
    return Path(configured) if configured else _DEFAULT_DIR


@blueprint.get("/")
@public
def index() -> Response:
    """The app's page."""
    return _index(web_dir())


@blueprint.get("/<page_path:path>")
@public
def page(path: str) -> Response:
    """A built file, or the app's page for any other path (the app routes it)."""
    folder = web_dir()
    if path != _INDEX and (folder / path).is_file():
        response = send_from_directory(folder, path)
        if path.startswith(_IMMUTABLE_PREFIX):
            response.cache_control.public = True
            response.cache_control.max_age = _YEAR_S
            response.cache_control.immutable = True
        return response
    if path.startswith(_IMMUTABLE_PREFIX):  # a stale asset after a rebuild: not a page
        raise NotFound(f"no file {path!r} in the web UI")
    return _index(folder)


def _index(folder: Path) -> Response:
    if not (folder / _INDEX).is_file():
        raise NotFound(
            "the web UI is not built: run 'make install' (or 'npm ci && npm run build' in web/); "
            "the API is under /api/v1"
        )
    response = send_from_directory(folder, _INDEX)
    response.cache_control.no_cache = True
    return response
