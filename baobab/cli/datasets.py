"""``baobab datasets``: upload, list, show and delete datasets on a server, and build them here.

The ``build`` commands live in :mod:`baobab.cli.datasets_build`, imported only when one
is run or listed: they need :mod:`baobab.store` (SQLAlchemy, pandas), the others HTTP only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from baobab.cli._common import (
    Column,
    format_size,
    format_time,
    json_option,
    print_json,
    print_record,
    print_table,
    with_client,
    yes_option,
)
from baobab.cli._lazy import LazyGroup
from baobab.sdk import Client

__all__ = ["datasets"]

_FORMATS_BY_SUFFIX = {".zip": "IMAGE_FILES", ".csv": "TABULAR"}
_COLUMNS: list[Column] = [
    ("id", "id"),
    ("name", "name"),
    ("format", "format"),
    ("size", lambda d: format_size(d.get("size"))),
    ("owner", "owner_id"),
    ("created", lambda d: format_time(d.get("created_at"))),
]
_FIELDS: list[Column] = [*_COLUMNS[:4], ("checksum", "checksum"), *_COLUMNS[4:]]


@click.group()
def datasets() -> None:
    """Build datasets in Baobab's formats, and upload and manage them on a server."""


@datasets.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", help="A name to show [default: the file name].")
@click.option(
    "--format",
    "data_format",
    type=click.Choice(["IMAGE_FILES", "TABULAR"], case_sensitive=False),
    help="The dataset format [default: IMAGE_FILES for a .zip, TABULAR for a .csv].",
)
@click.option("--target", help="TABULAR: the target column, so that the server checks every feature is numeric.")
@json_option
@with_client
def upload(
    client: Client, file: Path, name: str | None, data_format: str | None, target: str | None, as_json: bool
) -> None:
    """Upload FILE as a dataset; the server decodes it first, and refuses one that would fail a train job."""
    if data_format is None:
        data_format = _FORMATS_BY_SUFFIX.get(file.suffix.lower())
        if data_format is None:
            raise click.BadParameter(f"cannot tell the format of {file.name!r}: give it", param_hint="--format")
    dataset = client.create_dataset(name or file.name, file, format=data_format.upper(), target=target)
    if as_json:
        print_json(dataset)
    else:
        click.echo(
            f"uploaded dataset {dataset['id']} {dataset['name']!r}: {dataset['format']}, {format_size(dataset['size'])}"
        )


@datasets.command("list")
@json_option
@with_client
def list_datasets(client: Client, as_json: bool) -> None:
    """List your datasets (every dataset for an admin), newest first."""
    found = client.list_datasets()
    print_table(found, _COLUMNS, empty="no datasets; upload one with `baobab datasets upload FILE`", as_json=as_json)


@datasets.command()
@click.argument("dataset_id", metavar="ID", type=int)
@json_option
@with_client
def show(client: Client, dataset_id: int, as_json: bool) -> None:
    """Show one dataset."""
    dataset: dict[str, Any] = client.get_dataset(dataset_id)
    print_record(dataset, _FIELDS, as_json=as_json)


@datasets.command()
@click.argument("dataset_id", metavar="ID", type=int)
@yes_option
@with_client
def delete(client: Client, dataset_id: int, yes: bool) -> None:
    """Delete a dataset and its file (refused while a train job uses it)."""
    if not yes:
        dataset = client.get_dataset(dataset_id)
        click.confirm(f"delete dataset {dataset_id} {dataset['name']!r}?", abort=True, err=True)
    client.delete_dataset(dataset_id)
    click.echo(f"deleted dataset {dataset_id}")


@datasets.group(
    cls=LazyGroup,
    lazy_commands={
        "fashion-mnist": "baobab.cli.datasets_build:fashion_mnist",
        "tabular": "baobab.cli.datasets_build:tabular",
    },
)
def build() -> None:
    """Build a dataset from data that lies on this machine (nothing is downloaded)."""
