"""Generates the reference pages at build time (mkdocs-gen-files), from the code itself.

The settings table comes from the registry in ``baobab._settings``, the command line from
the click group ``baobab.cli.main``, and the REST API from the OpenAPI document the admin
app builds from its routes; so a setting, a command or a route added in the code is in the
next build of the site, and nobody has to remember to copy it here.
"""

from __future__ import annotations

import enum
import html
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import mkdocs_gen_files

from baobab import Settings
from baobab._settings import SETTINGS, Setting
from baobab.admin import create_app
from baobab.admin._openapi import build_document
from baobab.cli import main
from baobab.store import upgrade_database

#: Settings whose default is measured on the machine that imports the registry; the page
#: says what it is measured from instead of the build machine's number.
MACHINE_DEFAULTS = {
    "cpu_slots": "the cores this process may use",
    "gpus": "the NVIDIA GPUs this machine shows",
    "home": "`~/.baobab`",
}
METHODS = ("get", "post", "put", "patch", "delete")


def _prose(text: str) -> str:
    """Plain text as Markdown prose: outside code, brackets are usage syntax (not link references)
    and angle brackets are placeholders such as ``<release>`` (not HTML tags)."""
    # A code span opens and closes with the same run of backticks (docstrings use ``double``):
    # split() gives prose, span, its backticks, prose, span, backticks, ..., prose.
    parts = re.split(r"((`+).*?\2)", text)
    prose = [html.escape(p, quote=False).replace("[", "\\[").replace("]", "\\]") for p in parts[::3]]
    spans = [*parts[1::3], ""]
    return "".join(p + span for p, span in zip(prose, spans, strict=True))


def _cell(text: str) -> str:
    return _prose(text).replace("|", "\\|").replace("\n", " ")


def _default(setting: Setting) -> str:
    if setting.name in MACHINE_DEFAULTS:
        return MACHINE_DEFAULTS[setting.name]
    if setting.derive is not None:
        return "derived from `BAOBAB_HOME`"
    if setting.default is None:
        return "not set"
    value = setting.default.value if isinstance(setting.default, enum.Enum) else setting.default
    return f"`{value}`"


def _type(setting: Setting) -> str:
    if issubclass(setting.type, enum.Enum):
        return " \\| ".join(f"`{member.value}`" for member in setting.type)
    return setting.type.__name__


def settings_page() -> str:
    rows = [
        f"| `{s.env}` | {_type(s)} | {_default(s)} | {_cell(s.doc)}{' (secret: masked in logs)' if s.secret else ''} |"
        for s in SETTINGS
    ]
    return "\n".join(
        [
            "# Settings",
            "",
            "Every setting is a `BAOBAB_*` environment variable (or a keyword of `Settings.from_env`).",
            "A misspelt variable is refused with the closest name; a value outside its type or range",
            "is refused naming the variable. This table is generated from the registry in",
            "`baobab/_settings.py` when the site is built.",
            "",
            "| Variable | Type | Default | What |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[click.Context, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        yield sub, command
        if isinstance(command, click.Group):
            yield from _commands(command, sub)


def _command_section(ctx: click.Context, command: click.Command) -> list[str]:
    path = ctx.command_path
    level = "#" * min(2 + path.count(" ") - 1, 4)
    usage = command.get_usage(ctx)
    lines = [f"{level} `{path}`", "", _prose(command.help or command.short_help or ""), "", "```text", usage, "```", ""]
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if options:
        lines += ["| Option | What |", "| --- | --- |"]
        for option in options:
            record = option.get_help_record(ctx)
            if record is not None:
                lines.append(f"| `{record[0]}` | {_cell(record[1])} |")
        lines.append("")
    return lines


def cli_page() -> str:
    root = click.Context(main, info_name="baobab", **main.context_settings)
    lines = [
        "# Command line",
        "",
        "The `baobab` command, generated from its click group (`baobab/cli`) when the site is built.",
        "Every command answers `--help` with the same text.",
        "",
        "```text",
        main.get_usage(root),
        "```",
        "",
    ]
    for ctx, command in _commands(main, root):
        lines += _command_section(ctx, command)
    return "\n".join(lines)


def openapi_document() -> dict[str, Any]:
    """The admin app's own document, built from an app on a throw-away SQLite database."""
    with tempfile.TemporaryDirectory() as home:
        url = f"sqlite:///{Path(home) / 'baobab.db'}"
        upgrade_database(url)
        settings = Settings.from_env(
            environ={}, home=Path(home), database_url=url, admin_email="docs@example.com", admin_password="docs-build"
        )
        app = create_app(settings)
        try:
            return build_document(app)
        finally:
            app.extensions["baobab"].engine.dispose()


def api_page(document: dict[str, Any]) -> str:
    lines = [
        "# REST API",
        "",
        f"Every route of the admin API (OpenAPI {document['openapi']}), generated from the app's",
        "routes when the site is built. A running server describes itself at",
        "`GET /api/v1/openapi.json` (no token needed); the same document is",
        "[here](openapi.json). Routes marked *open* need no token; the others take",
        "`Authorization: Bearer <token>` from `POST /api/v1/tokens`.",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((path, method, operation))
    for tag in sorted(by_tag):
        lines += [f"## {tag}", "", "| Method | Route | Summary |", "| --- | --- | --- |"]
        for path, method, operation in by_tag[tag]:
            open_to_all = " *(open)*" if operation.get("security") == [] else ""
            summary = _cell(operation.get("summary", ""))
            lines.append(f"| `{method.upper()}` | `{path}` | {summary}{open_to_all} |")
        lines.append("")
    return "\n".join(lines)


RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


document = openapi_document()
for result in sorted(RESULTS.glob("*.md")) + sorted(RESULTS.glob("*.png")):
    with mkdocs_gen_files.open(f"benchmarks/results/{result.name}", "wb") as out:
        out.write(result.read_bytes())
for name, text in {
    "reference/settings.md": settings_page(),
    "reference/cli.md": cli_page(),
    "reference/rest-api.md": api_page(document),
    "reference/openapi.json": json.dumps(document, indent=1),
}.items():
    with mkdocs_gen_files.open(name, "w") as out:
        out.write(text)
