"""Schemathesis against a live server of the admin API: no 5xx, and every answer as the document says.

The server is the real WSGI app on loopback (werkzeug's threaded server); schemathesis
reads the live ``/api/v1/openapi.json`` and runs its offline phases (examples from the
schemas, coverage of their edges, random fuzzing, and stateful sequences that follow
one answer's ids into the next request) as the first SUPERADMIN and as a
MODEL_DEVELOPER, over a platform that holds a dataset, a template, a train job and
trials, so that the lookups find something. The seed is fixed and the examples bounded,
so a run is repeatable and takes about a minute per user.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import USER_PASSWORD, AddUser, Headers
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import add_model, add_trial, job_body, upload_dataset

from baobab.store import ModelTemplate, TrialState, UserRole, session_scope
from baobab.testing import serve_in_thread

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

#: Examples per operation and phase: enough to reach every branch of the schemas, few enough for CI.
MAX_EXAMPLES = 25
SEED = 21
CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance,status_code_conformance"
PHASES = "examples,coverage,fuzzing,stateful"
TEMPLATE = b"from baobab.model import BaseModel\n"


def _seed(app: Flask, client: FlaskClient, headers: Headers, owner_id: int, app_name: str) -> None:
    """A dataset, a template, a train job of ``app_name`` and two trials owned by the user of ``headers``."""
    engine = app.extensions["baobab"].engine
    data = upload_dataset(client, headers)
    model = add_model(engine, owner_id, name=f"{app_name}-model")
    with session_scope(engine) as session:  # the file behind the row, so that downloads find it
        row = session.get(ModelTemplate, model)
        assert row is not None
        row.checksum = app.extensions["baobab"].artifacts.put_bytes(row.artifact_path, TEMPLATE)
    created = client.post("/api/v1/train_jobs", json=job_body(data, data, [model], app=app_name), headers=headers)
    assert created.status_code == 201, created.json
    sub_job = created.json["sub_jobs"][0]["id"]
    add_trial(engine, sub_job, 1, TrialState.COMPLETED, 0.9)
    add_trial(engine, sub_job, 2, TrialState.RUNNING)


def _schemathesis(url: str, headers: Headers, report: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{url}/api/v1/openapi.json",
        "--checks", CHECKS, "--phases", PHASES, "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED),
        "--generation-deterministic", "--no-color", "--workers", "1", "--request-timeout", "30",
        "--suppress-health-check", "all", "--report", "junit", "--report-junit-path", str(report),
        *(arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=report.parent)  # its cache there


@sqlite_only
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(
    app: Flask, client: FlaskClient, root: Headers, add_user: AddUser, tmp_path: Path
) -> None:
    developer, developer_headers = add_user(UserRole.MODEL_DEVELOPER)
    _seed(app, client, root, 1, "shared")
    _seed(app, client, developer_headers, developer["id"], "shared")  # one app name, two owners
    with serve_in_thread(app) as url:
        for who, headers in (("superadmin", root), ("model developer", developer_headers)):
            if who == "model developer":
                headers = _restored(client, root, developer)
            run = _schemathesis(url, headers, tmp_path / f"{who}.xml")
            assert run.returncode == 0, f"schemathesis as the {who}:\n{run.stdout[-20000:]}\n{run.stderr[-5000:]}"


def _restored(client: FlaskClient, root: Headers, developer: dict[str, Any]) -> Headers:
    """The developer as it was, logged in again: the superadmin's run may have banned it or changed its role,
    which ends its token. The login comes from an address of its own, since the runs' failed logins may have
    used up the limit of theirs."""
    body = {"role": UserRole.MODEL_DEVELOPER.value, "banned": False}
    assert client.patch(f"/api/v1/users/{developer['id']}", json=body, headers=root).status_code == 200
    credentials = {"email": developer["email"], "password": USER_PASSWORD}
    login = client.post("/api/v1/tokens", json=credentials, environ_base={"REMOTE_ADDR": "127.0.0.2"})
    assert login.status_code == 201, login.json
    return {"Authorization": f"Bearer {login.json['token']}"}
