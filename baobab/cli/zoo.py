"""``baobab zoo``: the trained models the platform keeps to warm-start later trials, and where trials started from."""

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
)
from baobab.sdk import Client

__all__ = ["zoo"]

_COLUMNS: list[Column] = [
    ("id", "id"),
    ("name", "name"),
    ("task", "task"),
    ("score", "score"),
    ("params", "param_count"),
    ("size", lambda m: format_size(m.get("size_bytes"))),
    ("chosen", "times_chosen"),
    ("access", "access"),
    ("owner", "owner_id"),
    ("created", lambda m: format_time(m.get("created_at"))),
]
_FIELDS: list[Column] = [
    *_COLUMNS[:3],
    ("trial", "trial_id"),
    ("dataset", "dataset_id"),
    *_COLUMNS[3:5],
    ("layers", lambda m: sum(1 for n in (m.get("graph") or {}).get("nodes", ()) if n.get("weight") is not None)),
    ("operations", "node_count"),
    ("input -> output", "io_signature"),
    ("traced", "traced"),
    *_COLUMNS[5:7],
    ("last chosen", lambda m: format_time(m.get("last_chosen_at"))),
    *_COLUMNS[7:],
]


@click.group()
def zoo() -> None:
    """The model zoo: trained models that warm-start later trials."""


@zoo.command("list")
@click.option("--task", metavar="TASK", help="Only the zoo models for this task.")
@json_option
@with_client
def list_zoo(client: Client, task: str | None, as_json: bool) -> None:
    """List the zoo models you may see (yours and the public ones; all for an admin)."""
    found = client.list_zoo_models(task=task.upper() if task else None)
    print_table(found, _COLUMNS, empty="the zoo is empty: finished TorchModel trials join it", as_json=as_json)


@zoo.command()
@click.argument("zoo_model_id", metavar="ID", type=int)
@json_option
@with_client
def show(client: Client, zoo_model_id: int, as_json: bool) -> None:
    """Show one zoo model and its architecture's size."""
    model: dict[str, Any] = client.get_zoo_model(zoo_model_id)
    print_record(model, _FIELDS, as_json=as_json)


@zoo.command()
@click.argument("zoo_model_id", metavar="ID", type=int)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write [default: zoo-ID.safetensors, here].",
)
@with_client
def download(client: Client, zoo_model_id: int, out: Path | None) -> None:
    """Download a zoo model's parameters (safetensors)."""
    path = out or Path(f"zoo-{zoo_model_id}.safetensors")
    path.write_bytes(client.download_zoo_params(zoo_model_id))
    click.echo(f"wrote {path}")


@zoo.command()
@click.argument("trial_id", metavar="TRIAL_ID", type=int)
@json_option
@with_client
def parent(client: Client, trial_id: int, as_json: bool) -> None:
    """Show the zoo model a trial was warm-started from, and how similar it was."""
    trial = client.get_trial(trial_id)
    parent_id = trial.get("parent_zoo_model_id")
    if as_json:
        print_json({"trial_id": trial_id, "parent_zoo_model_id": parent_id, "similarity": trial.get("similarity")})
        return
    if parent_id is None:
        click.echo(f"trial {trial_id} was not warm-started (it trained from scratch)")
        return
    click.echo(f"trial {trial_id} started from zoo model {parent_id}, similarity {trial['similarity']:.3f}")
