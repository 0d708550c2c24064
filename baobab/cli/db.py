"""``baobab db``: create and upgrade the metadata database.

:mod:`baobab.store` (SQLAlchemy, Alembic, pandas) is imported inside the commands: the
rest of the command line must not pay for it.
"""

from __future__ import annotations

import click

from baobab import Settings
from baobab.exceptions import BaobabError

_url_option = click.option(
    "--url",
    help="Database URL (sqlite:///PATH or postgresql://USER@HOST/DB). "
    "Default: $BAOBAB_DATABASE_URL, else baobab.db in $BAOBAB_HOME (~/.baobab).",
)


def _database_url(url: str | None) -> str:
    try:
        return url or Settings.from_env().database_url
    except BaobabError as e:
        raise click.ClickException(str(e)) from e


@click.group()
def db() -> None:
    """Create, upgrade and inspect the metadata database."""


@db.command()
@_url_option
def upgrade(url: str | None) -> None:
    """Create the tables, or bring them to this Baobab's schema; safe to run again."""
    from baobab.store import describe_url, upgrade_database

    url = _database_url(url)
    try:
        revision = upgrade_database(url)
    except BaobabError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{describe_url(url)}: at schema revision {revision} (head)")


@db.command()
@_url_option
def current(url: str | None) -> None:
    """Show the schema revision of the database, and whether it needs an upgrade."""
    from baobab.store import current_revision, describe_url, head_revision

    url = _database_url(url)
    try:
        revision = current_revision(url)
    except BaobabError as e:
        raise click.ClickException(str(e)) from e
    head = head_revision()
    if revision == head:
        state = f"at schema revision {revision} (head)"
    elif revision is None:
        state = f"empty (no Baobab tables); run `baobab db upgrade` to create revision {head}"
    else:
        state = f"at schema revision {revision}, this Baobab needs {head}; run `baobab db upgrade`"
    click.echo(f"{describe_url(url)}: {state}")
