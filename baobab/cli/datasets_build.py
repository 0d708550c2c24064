"""``baobab datasets build``: write Baobab's dataset files from data that lies on this machine.

Imported only when one of these commands is run or listed (see :class:`~baobab.cli._lazy.LazyGroup`):
they need :mod:`baobab.store`, which the rest of ``baobab datasets`` does not.
"""

from __future__ import annotations

from pathlib import Path

import click

from baobab.exceptions import BaobabError
from baobab.store import (
    FASHION_MNIST_SOURCE,
    TABULAR_DATASETS,
    BuiltDataset,
    build_fashion_mnist,
    build_tabular,
)

__all__ = ["fashion_mnist", "tabular"]


_out_option = click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the train, val and test files into (created if missing).",
)
_seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Seeds the splits.")


@click.command("fashion-mnist")
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


@click.command("tabular")
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
