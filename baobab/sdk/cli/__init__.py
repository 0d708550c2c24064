"""The ``baobab`` command line: one click group, one module per command group."""

from __future__ import annotations

import click

from baobab import __version__
from baobab.sdk.cli.cluster import advisor, api, predictor, worker
from baobab.sdk.cli.datasets import datasets
from baobab.sdk.cli.db import db
from baobab.sdk.cli.dev import dev
from baobab.sdk.cli.jobs import jobs
from baobab.sdk.cli.login import login, logout
from baobab.sdk.cli.models import models
from baobab.sdk.cli.predict import predict
from baobab.sdk.cli.serve import serve
from baobab.sdk.cli.up import up
from baobab.sdk.cli.zoo import zoo

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="baobab")
def main() -> None:
    """Baobab: tune model templates, keep every model, serve the best."""


# Local commands (no server).
main.add_command(db)
main.add_command(dev)
main.add_command(up)  # the whole platform on this machine; imports the server parts only when run
# Cluster mode: one service per command, each on any machine.
main.add_command(api)
main.add_command(advisor)
main.add_command(worker)
main.add_command(predictor)

# Commands that talk to a server over HTTP (baobab.sdk.Client).
main.add_command(login)
main.add_command(logout)
main.add_command(datasets)
main.add_command(models)
main.add_command(jobs)
main.add_command(serve)
main.add_command(predict)
main.add_command(zoo)
