"""``baobab datasets``: build datasets here, and upload, list, show and delete them on a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from baobab.exceptions import BaobabError
from baobab.sdk import Client
from baobab.sdk.cli._common import (
    format_size,
    format_time,
    json_option,
    print_json,
    print_record,
    print_table,
    with_client,
    yes_option,
)
from baobab.store import (
    FASHION_MNIST_SOURCE,
    TABULAR_DATASETS,
    BuiltDataset,
    build_fashion_mnist,
    build_tabular,
)

__all__ = ["datasets"]

_FORMATS_BY_SUFFIX = {".zip": "IMAGE_FILES", ".csv": "TABULAR"}
_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("format", "format"),
    ("size", lambda d: format_size(d.get("size"))),
    ("owner", "owner_id"),
    ("created", lambda d: format_time(d.get("created_at"))),
]
_FIELDS = [*_COLUMNS[:4], ("checksum", "checksum"), *_COLUMNS[4:]]


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
    dataset = client.create_dataset(name or file.name, data_format.upper(), file, target=target)
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


@datasets.group()
def build() -> None:
    """Build a dataset from data that lies on this machine (nothing is downloaded)."""


_out_option = click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the train, val and test files into (created if missing).",
)
_seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Seeds the splits.")


@build.command("fashion-mnist")
@_out_option
@click.option("--limit", type=click.IntRange(min=1), help="At most this many train+val images (test cut alike).")
@click.option(
    "--val-fraction",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.1,
    show_default=True,
    help="Part of the training images held out for validation.",
)
@click.option(
    "--source",
    type=click.Path(file_okay=False, path_type=Path),
    default=FASHION_MNIST_SOURCE,
    show_default=True,
    help="Folder with the gzipped IDX files of the Debian package dataset-fashion-mnist.",
)
@_seed_option
def fashion_mnist(out: Path, limit: int | None, val_fraction: float, source: Path, seed: int) -> None:
    """Write Fashion-MNIST as train.zip, val.zip and test.zip (IMAGE_FILES, grayscale PNG)."""
    try:
        built = build_fashion_mnist(out, limit=limit, val_fraction=val_fraction, source=source, seed=seed)
    except (BaobabError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    _echo(built, "images")


@build.command("tabular")
@click.argument("name", type=click.Choice(TABULAR_DATASETS))
@_out_option
@_seed_option
def tabular(name: str, out: Path, seed: int) -> None:
    """Write one of scikit-learn's bundled sets as train.csv, val.csv and test.csv (target column 'target')."""
    _echo(build_tabular(name, out, seed=seed), "rows")


def _echo(built: BuiltDataset, unit: str) -> None:
    for split in built.splits:
        classes = "regression target" if split.classes is None else f"{split.classes} classes"
        click.echo(f"wrote {split.path}  {split.rows} {unit}, {classes}")
    if built.class_names is not None:
        click.echo("classes: " + ", ".join(f"{i} {name}" for i, name in enumerate(built.class_names)))
