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
import subprocess
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
MACHINE_DEFAULTS = {"cpu_slots": "the cores this process may use", "home": "`~/.baobab`"}
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


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

#: Each result's machine and what its setup favours, read from the result's own text. The
#: build fails on a result with no entry here, so a new result cannot go unlisted.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "overhead.md": (
        "2 cores, shared",
        "no one: Baobab, Optuna and a bare loop on the same machine, workers and SQLite",
    ),
    "overhead-celery.md": ("2 cores, shared; every service on it", "the bare Celery worker, which does no bookkeeping"),
    "strategies.md": ("2 cores, shared", "no one: table lookups on NAS-Bench-201, the same seeds for each"),
    "strategies-regret.md": (
        "2 cores, shared",
        "no one: integer-grid tables, the same seeds; proposal times from a shared machine",
    ),
    "strategies-scale.md": ("2 cores, shared", "a before/after of `tpe` and `bayes` on the same seeds"),
    "strategies-tpe-fix.md": (
        "2 cores, shared",
        "a one-off before/after record of `tpe`; the 'before' is not reproducible",
    ),
    "spaces.md": ("2 cores, shared", "re-evaluating a cell (as Optuna's TPE does) when judged by single noisy runs"),
    "spaces-fashion.md": ("2 cores, shared", "neither: evolution and random under the same 8-minute budget"),
    "early_stopping.md": ("2 cores", "the quick run: small data, so stopping early costs little accuracy"),
    "enas_fashion_mnist.md": (
        "2 cores, busy",
        "architectures that learn fast; one trial at a time, so concurrent shared trainings are not exercised",
    ),
    "enas_fashion_mnist_tuning.md": ("2 cores", "tuning on held-back seeds, not the reported ones"),
    "enas_shared_updates.md": (
        "2 cores",
        "concurrency modelled, not run: each pair trains one after the other from the same weights",
    ),
    "warm_start.md": ("2 cores, shared", "the zoo, in its same-task case (parents on the same split)"),
    "shared_data.md": ("2 cores", "the cache: 8 trials of one job on one machine, all on the same data"),
    "fusion.md": (
        "2 cores, shared, CPU only",
        "fusion: identical trials, data decoded once; the independent trials pay no platform overhead",
    ),
    "gpu.md": (
        "NVIDIA H200, 16 cores",
        "fusion: members alike in shape and length, data kept on the GPU, no platform overhead",
    ),
    "automl_budget.md": (
        "2 cores",
        "Optuna: it calls the templates directly, while Baobab pays its driver, rows and store",
    ),
    "placement.md": ("2 cores", "the forecast: one job at a time on a quiet machine, every template measured first"),
    "placement_gpu.md": (
        "NVIDIA H200",
        "one trial at a time on the GPU; trials of seconds, so fusion profiles cost more than they gain",
    ),
    "scale.md": (
        "2 cores, shared; simulated 1,000 slots",
        "the driver: the cluster is simulated, only the driver's time is real",
    ),
    "scale_api.md": (
        "2 cores, shared, PostgreSQL",
        "neither: one request at a time on loopback; figures vary by tens of percent",
    ),
    "scale_proposals.md": (
        "2 cores, shared",
        "Baobab: its strategies run in-process with no store; Optuna's PostgreSQL figures include storage",
    ),
    "serving.md": ("2 cores", "the predictor: Ray Serve's five processes share the same 2 cores"),
    "serving_fused.md": (
        "2 cores, shared",
        "the fan-out's costs are per process; on 2 cores five workers cannot compute in parallel",
    ),
    "serving_fused_gpu.md": (
        "NVIDIA H200, 16 cores",
        "the stacked pass is cheap on the GPU; the CPU work of five answers is the bound",
    ),
    "web_large_job.md": (
        "2 cores, shared, SQLite, headless Chromium",
        "a finished job (no live polling); figures vary by tens of percent",
    ),
    "web_large_job_100000.md": ("2 cores, PostgreSQL, headless Chromium", "a finished job (no live polling)"),
}


def _committed(path: Path) -> str:
    """The date of the last commit that changed ``path``: when the result was last written."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path)], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not in git"
    return out or "not committed"


def _title(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    return first.lstrip("# ").strip()


def benchmarks_page() -> str:
    results = sorted(RESULTS.glob("*.md"))
    unlisted = [p.name for p in results if p.name not in BENCHMARKS]
    if unlisted:
        raise SystemExit(f"docs/_gen/reference.py: add {', '.join(unlisted)} to BENCHMARKS (machine, what it favours)")
    rows = []
    for p in results:
        machine, favours = BENCHMARKS[p.name]
        rows.append(f"| [{_cell(_title(p))}](results/{p.name}) | {_committed(p)} | {machine} | {favours} |")
    return "\n".join(
        [
            "# Benchmarks",
            "",
            "Every result in `bench/results`, each written by its script under `bench/` (the Makefile's",
            "`bench-*` targets run them). Date: the last commit of the result. Machine and what the",
            "setup favours are read from the result's own text; most ran on a 2-core machine shared",
            "with other work, so compare figures within one result, not across results.",
            "",
            "| Result | Date | Machine | What its setup favours |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


document = openapi_document()
for result in sorted(RESULTS.glob("*.md")) + sorted(RESULTS.glob("*.png")):
    with mkdocs_gen_files.open(f"benchmarks/results/{result.name}", "wb") as out:
        out.write(result.read_bytes())
for name, text in {
    "reference/settings.md": settings_page(),
    "reference/cli.md": cli_page(),
    "reference/rest-api.md": api_page(document),
    "reference/openapi.json": json.dumps(document, indent=1),
    "benchmarks/index.md": benchmarks_page(),
}.items():
    with mkdocs_gen_files.open(name, "w") as out:
        out.write(text)
