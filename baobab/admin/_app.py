"""The app factory of the admin API."""

from __future__ import annotations

from flask import Flask

from baobab import Settings
from baobab.admin import (
    _datasets,
    _inference_jobs,
    _inference_stats,
    _inference_versions,
    _models,
    _openapi,
    _request_logs,
    _telemetry,
    _tokens,
    _train_job_forecast,
    _train_job_time,
    _train_job_trials,
    _train_jobs,
    _trials,
    _users,
    _web,
    _worker_api,
    _zoo,
)
from baobab.admin._auth import authenticate, token_serializer
from baobab.admin._bootstrap import bootstrap_superadmin
from baobab.admin._errors import register_error_handlers
from baobab.admin._query import check_path_ids
from baobab.admin._state import EXTENSION, AdminState
from baobab.store import ArtifactStore, EventChannel, LocalEventChannel, check_schema, create_engine_from_url

__all__ = ["create_app"]

_BLUEPRINTS = (
    _tokens.blueprint,
    _users.blueprint,
    _datasets.blueprint,
    _models.blueprint,
    _train_jobs.blueprint,
    _train_job_forecast.blueprint,
    _train_job_time.blueprint,
    _train_job_trials.blueprint,
    _trials.blueprint,
    _inference_jobs.blueprint,
    _inference_stats.blueprint,
    _request_logs.blueprint,
    _inference_versions.blueprint,
    _worker_api.blueprint,
    _zoo.blueprint,
    _openapi.blueprint,
    _telemetry.blueprint,
    _web.blueprint,
)


def create_app(settings: Settings | None = None, events: EventChannel | None = None) -> Flask:
    """The admin API on the database ``settings`` name, ready for any WSGI server.

    Starting checks the configuration (production mode refuses the development secret
    key) and the schema, then creates the first SUPERADMIN on an empty user table
    (see :func:`baobab.admin._bootstrap.bootstrap_superadmin`).

    Args:
        settings: The configuration; read from the environment when None.
        events: Where the app announces new and stopped jobs (see
            :mod:`baobab.store._events`); a channel nobody listens to when None.

    Raises:
        SettingsError: the settings break a rule (see :meth:`Settings.from_env`).
        StoreError: the database cannot be reached or its schema is not this
            Baobab's (run ``baobab db upgrade``).
    """
    if settings is None:
        settings = Settings.from_env()
    else:
        # An object made by dataclasses.replace() or the constructor skipped from_env's checks.
        settings.check()
    engine = create_engine_from_url(settings.database_url)
    try:
        check_schema(engine)
        bootstrap_superadmin(engine, settings)
        artifacts = ArtifactStore(settings.artifacts_url)
    except BaseException:
        engine.dispose()
        raise
    app = Flask("baobab.admin")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_upload_mb * 2**20
    app.extensions[EXTENSION] = AdminState(
        settings=settings,
        engine=engine,
        tokens=token_serializer(settings.signing_key()),
        artifacts=artifacts,
        events=events if events is not None else LocalEventChannel(),
    )
    register_error_handlers(app)
    app.url_value_preprocessor(check_path_ids)  # runs before authenticate: a 404 needs no token
    app.before_request(authenticate)
    for blueprint in _BLUEPRINTS:
        app.register_blueprint(blueprint)
    return app
