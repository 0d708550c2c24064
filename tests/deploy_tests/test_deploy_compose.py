"""docker-compose.yml (cluster mode on one host) and the Dockerfiles, read as files; plus
``docker compose config`` where the compose plugin exists (skipped, with the reason, elsewhere)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from baobab.testing import missing_part

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SECRETS = {
    "BAOBAB_SECRET_KEY": "k" * 32,
    "BAOBAB_ADMIN_PASSWORD": "pw1",
    "POSTGRES_PASSWORD": "pw2",
    "REDIS_PASSWORD": "pw3",
}


def test_compose_runs_every_cluster_service_and_no_secret_has_a_default():
    text = COMPOSE.read_text()
    services = yaml.safe_load(text)["services"]
    assert set(services) == {"postgres", "redis", "api", "advisor", "worker", "predictor"}
    for name in SECRETS:
        uses = re.findall(r"\$\{" + name + r"(:?[-?])", text)
        assert uses and set(uses) == {":?"}, name  # required, never defaulted
    assert services["api"]["command"][0] == "api" and services["worker"]["command"][0] == "worker"
    assert services["api"]["image"].startswith("baobab-api:") and services["worker"]["image"].startswith(
        "baobab-worker:"
    )
    assert "BAOBAB_DATABASE_URL" not in services["worker"]["environment"]  # workers never hold it
    assert "BAOBAB_SECRET_KEY" not in services["worker"]["environment"]
    assert all("healthcheck" in services[s] for s in ("postgres", "redis", "api", "worker"))


@pytest.mark.parametrize("service", ["worker", "predictor"])
def test_the_services_that_run_templates_are_confined(service):
    """Read-only root, no capability, no privilege to gain; writable: /tmp, BAOBAB_HOME and the artifacts."""
    spec = yaml.safe_load(COMPOSE.read_text())["services"][service]
    assert (spec["read_only"], spec["cap_drop"], spec["security_opt"]) == (True, ["ALL"], ["no-new-privileges:true"])
    assert spec["tmpfs"] == ["/tmp"] and spec["volumes"] == ["/data", "artifacts:/data/artifacts"]
    assert "user" not in spec  # the image's own, non-root (test_dockerfiles_are_multi_stage_non_root...)


@pytest.mark.parametrize("name", ["Dockerfile.api", "Dockerfile.worker"])
def test_dockerfiles_are_multi_stage_non_root_and_take_a_local_base(name):
    text = (ROOT / "docker" / name).read_text()
    assert "ARG BASE_IMAGE=" in text
    assert text.count("FROM ${BASE_IMAGE}") == 2  # build stage + runtime stage
    assert "COPY --from=build /opt/baobab /opt/baobab" in text
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert ('pip install "${TORCH}"' in text) == (name == "Dockerfile.worker")  # torch in the worker only


def _compose() -> list[str]:
    for command in (["docker", "compose"], ["docker-compose"]):
        try:
            if subprocess.run([*command, "version"], capture_output=True, timeout=20).returncode == 0:
                return command
        except (FileNotFoundError, subprocess.TimeoutExpired):
            continue
    missing_part("neither the docker compose plugin nor docker-compose is installed here")


def test_docker_compose_config_accepts_the_file():
    command = _compose()
    env = {**os.environ, **SECRETS}
    done = subprocess.run([*command, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "redis://:pw3@redis:6379/0" in done.stdout


def test_docker_compose_refuses_to_run_without_the_secrets():
    command = _compose()
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    done = subprocess.run([*command, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0 and "set " in done.stderr
