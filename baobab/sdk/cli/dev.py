"""``baobab dev``: try a model template on this machine, with no server."""

from __future__ import annotations

import click


@click.group()
def dev() -> None:
    """Develop model templates locally."""
