"""The ``baobab`` command line: one click group, one module per command group."""

from __future__ import annotations

import click

from baobab import __version__
from baobab.sdk.cli.datasets import datasets
from baobab.sdk.cli.db import db
from baobab.sdk.cli.dev import dev

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="baobab")
def main() -> None:
    """Baobab: tune model templates, keep every model, serve the best."""


main.add_command(datasets)
main.add_command(db)
main.add_command(dev)
