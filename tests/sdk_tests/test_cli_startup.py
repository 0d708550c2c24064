"""``baobab --help`` and the HTTP commands start without the server's parts.

Each command runs in a fresh interpreter (the test process has imported everything
already), which then lists the modules it loaded. The server's parts cost about a
second of start-up (pandas, SQLAlchemy, the store); only the commands that run a
server or build datasets may import them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the command line on argv[2:], then writes the names of the loaded modules to argv[1].
_PROBE = """
import json, sys
from baobab.cli import main
try:
    main(sys.argv[2:], prog_name="baobab")
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""

_SERVER_MODULES = {"torch", "pandas", "sqlalchemy", "baobab.store"}


def loaded_modules(args: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.exists(), done.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["jobs", "--help"],
        ["jobs", "list", "--help"],
        ["predict", "--help"],
        ["datasets", "--help"],
        ["dev", "--help"],  # lists test-model, whose module needs baobab.model (NumPy), not the store
    ],
)
def test_help_loads_no_server_part(args: list[str], tmp_path: Path) -> None:
    assert loaded_modules(args, tmp_path) & _SERVER_MODULES == set()


def test_http_commands_load_no_server_part(tmp_path: Path, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    queries = tmp_path / "queries.json"
    queries.write_text("[[1, 2]]")
    assert loaded_modules(["jobs", "list", "--url", url], tmp_path) & _SERVER_MODULES == set()
    assert loaded_modules(["predict", "--url", url, "--queries", str(queries)], tmp_path) & _SERVER_MODULES == set()


def test_server_commands_still_load_their_parts(tmp_path: Path) -> None:
    """The lazy groups do import what their commands need once listed (no silent empty group)."""
    assert "baobab.store" in loaded_modules(["datasets", "build", "--help"], tmp_path)
