"""The documentation site builds strictly, and its generated reference misses nothing.

One ``mkdocs build --strict`` per session (the same command as ``make docs``), into a
temporary folder; then every setting of the registry, every command of the click group
and every route of the admin app must appear in the built HTML. Each list is read here
from the code itself, not from the generator, so a page the generator stopped filling
fails.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from baobab import Settings
from baobab._settings import SETTINGS
from baobab.admin import create_app
from baobab.cli import main
from baobab.store import upgrade_database
from baobab.testing import missing_part

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None:
        missing_part("MkDocs is not installed in this environment: `make docs` installs the docs extra")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"},
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-4000:]}"
    return out


def _text(site: Path, page: str) -> str:
    """The page's HTML as text, tags dropped and entities decoded."""
    raw = (site / page / "index.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def _command_paths(group: click.Group, ctx: click.Context) -> Iterator[str]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        yield sub.command_path
        if isinstance(command, click.Group):
            yield from _command_paths(command, sub)


def test_every_setting_is_in_the_settings_page(site: Path) -> None:
    text = _text(site, "reference/settings")
    missing = [s.env for s in SETTINGS if s.env not in text]
    assert not missing, f"settings missing from the docs: {missing}"
    for setting in SETTINGS:  # its doc line beside it, not just the name
        assert setting.doc in text, setting.env


def test_every_command_is_in_the_cli_page(site: Path) -> None:
    text = _text(site, "reference/cli")
    paths = list(_command_paths(main, click.Context(main, info_name="baobab")))
    assert "baobab dev test-model" in paths and "baobab serve rollout" in paths  # lazy and nested groups walked
    missing = [path for path in paths if path not in text]
    assert not missing, f"commands missing from the docs: {missing}"


def test_every_api_route_is_in_the_rest_api_page(site: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'baobab.db'}"
    upgrade_database(url)
    app = create_app(Settings.from_env(environ={}, home=tmp_path, database_url=url))
    try:
        routes = {
            (method, re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule))
            for rule in app.url_map.iter_rules()
            if rule.rule.startswith("/api/v1")
            for method in rule.methods or ()
            if method not in {"HEAD", "OPTIONS"}
        }
        with app.test_client() as client:
            document = client.get("/api/v1/openapi.json").json
    finally:
        app.extensions["baobab"].engine.dispose()
    text = _text(site, "reference/rest-api")
    rows = set(re.findall(r"\b(GET|POST|PUT|PATCH|DELETE)\s+(/api/v1\S*)", text))
    assert len(routes) > 50
    missing = sorted(routes - rows)
    assert not missing, f"routes missing from the docs: {missing}"
    # Each summary reads as the server gives it: its code spans and brackets survive the Markdown.
    flat = re.sub(r"\s+", " ", text)
    summaries = [op["summary"] for item in document["paths"].values() for op in item.values() if "summary" in op]
    garbled = [s for s in summaries if re.sub(r"\s+", " ", re.sub(r"`+", "", s)) not in flat]
    assert not garbled, f"summaries that do not read as written: {garbled[:5]}"


def test_the_sdk_and_template_references_are_rendered_from_docstrings(site: Path) -> None:
    from baobab.model import BaseModel
    from baobab.sdk import Client

    sdk = _text(site, "reference/sdk")
    public = [name for name in dir(Client) if not name.startswith("_") and callable(getattr(Client, name))]
    assert "create_train_job" in public  # inherited from a mixin: the reference must show those too
    missing = [name for name in public if name not in sdk]
    assert not missing, f"Client methods missing from the SDK reference: {missing}"
    template = _text(site, "reference/template-api")
    for name in ("get_knob_config", "train", "evaluate", "predict", "dump_parameters", "load_parameters"):
        assert hasattr(BaseModel, name) and name in template, name


def test_every_benchmark_result_is_indexed_with_its_date(site: Path) -> None:
    text = _text(site, "benchmarks")
    for result in sorted((ROOT / "bench" / "results").glob("*.md")):
        title = result.read_text().splitlines()[0].lstrip("# ").replace("`", "").strip()
        assert title in text, result.name
        assert (site / "benchmarks" / "results" / result.stem / "index.html").exists(), result.name
    assert len(re.findall(r"\b\d{4}-\d\d-\d\d\b", text)) >= len(list((ROOT / "bench" / "results").glob("*.md")))


PAGES = sorted((ROOT / "docs").glob("*.md"))
SNIPPETS = [
    (page.name, number, code)
    for page in PAGES
    for number, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S))
]


@pytest.mark.parametrize(("page", "number", "code"), SNIPPETS, ids=[f"{p}-{n}" for p, n, _ in SNIPPETS])
def test_every_python_snippet_of_the_guides_is_python(page: str, number: int, code: str) -> None:
    """A reader pastes these: each must at least parse (the guides' fragments may use earlier names)."""
    compile(code, f"docs/{page} snippet {number}", "exec")
