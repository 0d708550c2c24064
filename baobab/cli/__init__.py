"""The ``baobab`` command line: one click group, one module per command group.

``baobab --help`` and the commands that talk to a server over HTTP load only click,
``requests`` and :mod:`baobab.sdk`: the server's parts (the store, the platform, the
model API) are imported inside the commands that run them, or by a
:class:`~baobab.cli._lazy.LazyGroup` when its commands are run or listed.
"""

from __future__ import annotations

import click

from baobab import __version__
from baobab.cli._lazy import LazyGroup
from baobab.cli.cluster import advisor, api, predictor, worker
from baobab.cli.datasets import datasets
from baobab.cli.db import db
from baobab.cli.jobs import jobs
from baobab.cli.login import login, logout
from baobab.cli.models import models
from baobab.cli.predict import predict
from baobab.cli.serve import serve
from baobab.cli.up import up
from baobab.cli.zoo import zoo

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="baobab")
def main() -> None:
    """Baobab: tune model templates, keep every model, serve the best."""


# Local commands (no server).
main.add_command(db)
main.add_command(
    LazyGroup("dev", help="Develop model templates locally.", lazy_commands={"test-model": "baobab.cli.dev:test_model"})
)
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
