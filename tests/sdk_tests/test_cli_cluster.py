"""The cluster services' command lines refuse wrong options and settings before starting anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from baobab.cli import main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"BAOBAB_HOME": str(tmp_path), "BAOBAB_EXECUTOR": "local", "BAOBAB_API_URL": ""}


DOCKER = {"BAOBAB_EXECUTOR": "docker", "BAOBAB_BROKER_URL": "redis://127.0.0.1:1/0"}


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        (["worker", "--gpus", "0,x"], {}, "'0,x': expected distinct GPU ids separated by commas"),
        (["worker", "--gpus", "1,1"], {}, "'1,1': expected distinct GPU ids separated by commas"),
        (["predictor", "--port", "8200"], {}, "--port needs --job"),
        (["predictor", "--job", "0"], {}, "Invalid value for '--job'"),
    ],
)
def test_wrong_options_are_usage_errors(env: dict[str, str], args: list[str], settings: dict, message: str) -> None:
    result = CliRunner().invoke(main, args, env={**env, **settings})
    assert result.exit_code == 2 and message in result.output


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        (["worker", "--slots", "2"], {}, "baobab worker needs BAOBAB_API_URL"),
        (["advisor"], {"BAOBAB_EXECUTOR": "docker"}, "BAOBAB_EXECUTOR=docker needs a broker"),
        (["advisor"], DOCKER, "BAOBAB_EXECUTOR=docker needs BAOBAB_API_URL"),
        (
            ["advisor"],
            {**DOCKER, "BAOBAB_API_URL": "http://api:8100", "DOCKER_HOST": "tcp://127.0.0.1:1"},
            "BAOBAB_EXECUTOR=docker: no Docker engine answers",
        ),
        (["api"], {"BAOBAB_DOCKER_MEMORY_PER_SLOT": "lots"}, "BAOBAB_DOCKER_MEMORY_PER_SLOT='lots'"),
    ],
)
def test_wrong_settings_are_refused_with_the_reason(
    env: dict[str, str], args: list[str], settings: dict[str, str], message: str
) -> None:
    result = CliRunner().invoke(main, args, env={**env, **settings})
    assert result.exit_code == 1 and message in result.output


def test_a_metrics_port_taken_is_refused_naming_it(tmp_path: Path) -> None:
    # A process of its own: `baobab worker` puts prometheus_client in multiprocess mode before importing it.
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "BAOBAB_HOME": str(tmp_path), "BAOBAB_API_URL": "http://127.0.0.1:1"}
        result = subprocess.run(
            [sys.executable, "-m", "baobab", "worker", "--metrics-port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1, result.stderr
    assert f"cannot serve /metrics on 0.0.0.0:{port}" in result.stderr
