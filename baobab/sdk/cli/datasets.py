"""``baobab datasets``: build and (with the platform) manage datasets."""

from __future__ import annotations

import click


@click.group()
def datasets() -> None:
    """Build datasets in Baobab's formats."""
