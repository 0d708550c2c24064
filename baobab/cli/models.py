"""``baobab models``: upload, list, show, download and delete model templates on a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from baobab.cli._common import (
    Column,
    format_time,
    json_option,
    print_json,
    print_record,
    print_table,
    with_client,
    yes_option,
)
from baobab.sdk import Client

__all__ = ["models"]

_COLUMNS: list[Column] = [
    ("id", "id"),
    ("name", "name"),
    ("task", "task"),
    ("class", "class_name"),
    ("access", "access"),
    ("owner", "owner_id"),
    ("created", lambda m: format_time(m.get("created_at"))),
]
_FIELDS: list[Column] = [
    *_COLUMNS[:5],
    ("dependencies", lambda m: ", ".join(f"{k}=={v}" for k, v in (m.get("dependencies") or {}).items()) or None),
    ("checksum", "checksum"),
    *_COLUMNS[5:],
]


@click.group()
def models() -> None:
    """Upload and manage model templates on a server."""


def _dependencies(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``NAME==VERSION`` (or ``NAME=VERSION``) options as a dict."""
    parsed: dict[str, str] = {}
    for text in values:
        name, sep, version = text.partition("==") if "==" in text else text.partition("=")
        name, version = name.strip(), version.strip()
        if not sep or not name or not version:
            raise click.BadParameter(f"{text!r} is not NAME==VERSION", ctx=ctx, param=param)
        if name in parsed:
            raise click.BadParameter(f"{name!r} is given twice", ctx=ctx, param=param)
        parsed[name] = version
    return parsed


@models.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--task",
    required=True,
    metavar="TASK",
    help="What it is for: IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION or TABULAR_REGRESSION.",
)
@click.option("--class", "class_name", required=True, help="The template class in FILE.")
@click.option("--name", help="A name to show [default: the file's name without .py].")
@click.option(
    "--dependency",
    "dependencies",
    multiple=True,
    callback=_dependencies,
    metavar="NAME==VERSION",
    help="A package the template needs (repeatable).",
)
@click.option("--public", is_flag=True, help="Let every user train it (default: you and admins only).")
@json_option
@with_client
def upload(
    client: Client,
    file: Path,
    task: str,
    class_name: str,
    name: str | None,
    dependencies: dict[str, str],
    public: bool,
    as_json: bool,
) -> None:
    """Upload FILE (a .py template); the server loads and checks it before accepting it."""
    model = client.create_model(
        file,
        name,
        task=task.upper(),
        class_name=class_name,
        dependencies=dependencies,
        access="PUBLIC" if public else "PRIVATE",
    )
    if as_json:
        print_json(model)
        return
    knobs = ", ".join(model.get("knob_config") or {}) or "none"
    click.echo(f"uploaded model {model['id']} {model['name']!r}: {model['task']}, {model['access']}; knobs: {knobs}")


@models.command("list")
@click.option("--task", metavar="TASK", help="Only the templates for this task.")
@json_option
@with_client
def list_models(client: Client, task: str | None, as_json: bool) -> None:
    """List your templates and the public ones (all for an admin)."""
    found = client.list_models(task=task.upper() if task else None)
    print_table(found, _COLUMNS, empty="no models; upload one with `baobab models upload FILE`", as_json=as_json)


@models.command()
@click.argument("model_id", metavar="ID", type=int)
@json_option
@with_client
def show(client: Client, model_id: int, as_json: bool) -> None:
    """Show one template and its knobs."""
    model: dict[str, Any] = client.get_model(model_id)
    if as_json:
        print_json(model)
        return
    print_record(model, _FIELDS)
    knobs = model.get("knob_config") or {}
    if knobs:
        click.echo()
        rows = [
            {"knob": name, "type": knob.get("type"), "settings": _settings(knob)}
            for name, knob in knobs.items()
            if isinstance(knob, dict)
        ]
        print_table(rows, [("knob", "knob"), ("type", "type"), ("settings", "settings")], empty="")


def _settings(knob: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in knob.items() if key != "type")


@models.command()
@click.argument("model_id", metavar="ID", type=int)
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    help="The file to write, or a folder to write it into [default: its name, here].",
)
@with_client
def download(client: Client, model_id: int, out: Path | None) -> None:
    """Download a template's .py file."""
    path = client.download_model(model_id, out)
    click.echo(f"wrote {path}")


@models.command()
@click.argument("model_id", metavar="ID", type=int)
@yes_option
@with_client
def delete(client: Client, model_id: int, yes: bool) -> None:
    """Delete a template (refused while a train job uses it)."""
    if not yes:
        model = client.get_model(model_id)
        click.confirm(f"delete model {model_id} {model['name']!r}?", abort=True, err=True)
    client.delete_model(model_id)
    click.echo(f"deleted model {model_id}")
