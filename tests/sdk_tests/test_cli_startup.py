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
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT_EMAIL, ROOT_PASSWORD, ApiServer, OddServer
from werkzeug.wrappers import Request, Response

from baobab.sdk import Client

# Runs the command line on argv[2:], then writes its exit status, what it printed and the names
# of the loaded modules to argv[1].
_PROBE = """
import contextlib, io, json, sys
from baobab.cli import main
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[2:], prog_name="baobab")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "output": out.getvalue(), "modules": sorted(sys.modules)}, f)
"""

_SERVER_MODULES = {"torch", "pandas", "sqlalchemy", "baobab.store"}


@dataclass(frozen=True)
class Run:
    code: int
    output: str
    modules: set[str]


def run_cli(args: list[str], tmp_path: Path) -> Run:
    """``baobab ARGS`` in a fresh interpreter, logged in as ``config/baobab/credentials.json`` says."""
    out = tmp_path / "probe.json"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.exists(), done.stderr
    probe = json.loads(out.read_text())
    return Run(code=probe["code"], output=probe["output"], modules=set(probe["modules"]))


def loaded_modules(args: list[str], tmp_path: Path) -> set[str]:
    return run_cli(args, tmp_path).modules


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
    """Even when the server cannot be reached (the error path)."""
    url = f"http://127.0.0.1:{closed_port}"
    queries = tmp_path / "queries.json"
    queries.write_text("[[1, 2]]")
    assert loaded_modules(["jobs", "list", "--url", url], tmp_path) & _SERVER_MODULES == set()
    assert loaded_modules(["predict", "--url", url, "--queries", str(queries)], tmp_path) & _SERVER_MODULES == set()


def test_jobs_list_against_the_api_loads_no_server_part(api_server: ApiServer, tmp_path: Path) -> None:
    """A whole ``jobs list``: the saved login, the request, the answer printed as a table."""
    with Client(api_server.url) as client:
        token = client.login(ROOT_EMAIL, ROOT_PASSWORD)["token"]
    credentials = tmp_path / "config" / "baobab" / "credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(json.dumps({"url": api_server.url, "token": token}))
    run = run_cli(["jobs", "list"], tmp_path)
    assert run.code == 0, run.output
    assert run.modules & _SERVER_MODULES == set()


def test_predict_against_a_predictor_loads_no_server_part(odd_server: OddServer, tmp_path: Path) -> None:
    """A whole ``predict``: the queries sent to a predictor on loopback, its answer printed per query."""
    sent: list[object] = []

    def predictor(request: Request) -> Response:
        sent.append(request.get_json())
        answer = {"predictions": [0, 1], "members": {"answered": [7], "left_out": []}}
        return Response(json.dumps(answer), content_type="application/json")

    queries = tmp_path / "queries.json"
    queries.write_text("[[1, 2], [3, 4]]")
    run = run_cli(["predict", "--url", odd_server(predictor), "--queries", str(queries)], tmp_path)
    assert run.code == 0 and run.output == "query 0: 0\nquery 1: 1\n", run.output
    assert sent == [{"queries": [[1, 2], [3, 4]]}]
    assert run.modules & _SERVER_MODULES == set()


def test_server_commands_still_load_their_parts(tmp_path: Path) -> None:
    """The lazy groups do import what their commands need once listed (no silent empty group)."""
    assert "baobab.store" in loaded_modules(["datasets", "build", "--help"], tmp_path)
