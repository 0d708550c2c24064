"""``/api/v1/models``: templates checked in a separate process before they are kept, visibility, clean refusals.

Uploads run the real check process (about 0.2 s for the small template in ``templates/tiny.py``,
about 1 s for the scikit-learn example), so each test uploads as few as it can.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.datastructures import FileStorage
from werkzeug.serving import make_server
from werkzeug.test import TestResponse, encode_multipart

from baobab import Settings
from baobab.admin import _models, create_app
from baobab.model import DatasetFormat, Task
from baobab.store import Dataset, SubJob, TrainJob, UserRole, session_scope
from baobab.testing import wait_until

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
Upload = Callable[..., TestResponse]

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
TINY = (TEMPLATES / "tiny.py").read_bytes()
SKLEARN = (HERE.parents[1] / "examples" / "models" / "sklearn_tabular.py").read_bytes()
SKLEARN_FIELDS = {"name": "logistic regression", "task": "TABULAR_CLASSIFICATION", "class_name": "SkTabularClassifier"}
TINY_FIELDS = {"name": "tiny", "task": "TABULAR_CLASSIFICATION", "class_name": "Tiny"}
TINY_KNOBS = {
    "lr": {"type": "FloatKnob", "value_min": 1e-4, "value_max": 1e-1, "is_exp": True},
    "kind": {"type": "CategoricalKnob", "values": ["a", "b"]},
    "epochs": {"type": "FixedKnob", "value": 3},
    "quick": {"type": "PolicyKnob", "policy": "EARLY_STOP"},
}
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def upload(client: FlaskClient) -> Upload:
    """Posts a multipart upload; ``file`` is (bytes, file name), or None to leave it out."""

    def upload(headers: Headers, file: tuple[bytes, str] | None, /, **fields: str) -> TestResponse:
        data: dict[str, Any] = dict(fields)
        if file is not None:
            data["file"] = (io.BytesIO(file[0]), file[1])
        return client.post("/api/v1/models", data=data, headers=headers, content_type="multipart/form-data")

    return upload


def stored_files(settings: Settings) -> list[Path]:
    return sorted(p for p in Path(settings.artifacts_url).rglob("*") if p.is_file())


def error_of(response: TestResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    return response.json["error"]


def test_upload_list_get_download_delete(
    client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings
) -> None:
    user, dev = add_user(UserRole.MODEL_DEVELOPER)
    created = upload(
        dev, (SKLEARN, "../../etc/sklearn tabular.py"), **SKLEARN_FIELDS,
        dependencies='{"scikit-learn": "1.5.2", "numpy": ">=1.26"}', access="PUBLIC",
    )  # fmt: skip
    assert created.status_code == 201, created.json
    model = created.json
    assert model.pop("created_at")
    assert model == {
        "id": model["id"], "name": "logistic regression", "task": "TABULAR_CLASSIFICATION",
        "class_name": "SkTabularClassifier", "access": "PUBLIC",
        "dependencies": {"scikit-learn": "1.5.2", "numpy": ">=1.26"},
        "knob_config": {
            "C": {"type": "FloatKnob", "value_min": 1e-3, "value_max": 1e2, "is_exp": True},
            "class_weight": {"type": "CategoricalKnob", "values": [None, "balanced"]},
            "fit_intercept": {"type": "CategoricalKnob", "values": [True, False]},
            "max_iter": {"type": "FixedKnob", "value": 500},
        },
        "checksum": hashlib.sha256(SKLEARN).hexdigest(), "owner_id": user["id"],
    }  # fmt: skip
    # Stored under a key of its own making, never under the client's file name.
    [stored] = stored_files(settings)
    key = stored.relative_to(settings.artifacts_url).as_posix()
    assert re.fullmatch(r"models/[0-9a-f]{32}/template\.py", key), key
    assert stored.read_bytes() == SKLEARN

    model_id = created.json["id"]
    assert client.get("/api/v1/models", headers=dev).json == {"models": [created.json]}
    assert client.get(f"/api/v1/models/{model_id}", headers=dev).json == created.json
    download = client.get(f"/api/v1/models/{model_id}/file", headers=dev)
    assert download.status_code == 200
    assert download.data == SKLEARN
    assert download.headers["Content-Type"] == "text/x-python; charset=utf-8"
    assert download.headers["Content-Disposition"] == 'attachment; filename="logistic_regression.py"'

    assert client.delete(f"/api/v1/models/{model_id}", headers=dev).status_code == 204
    assert stored_files(settings) == []
    gone = error_of(client.get(f"/api/v1/models/{model_id}", headers=dev), 404)
    assert gone["message"] == f"no model with id {model_id}"
    assert error_of(client.get(f"/api/v1/models/{model_id}/file", headers=dev), 404)["code"] == "not_found"
    assert client.get("/api/v1/models", headers=dev).json == {"models": []}


def test_bad_fields_and_files_are_refused_and_leave_nothing(
    client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings
) -> None:
    _, dev = add_user(UserRole.MODEL_DEVELOPER)
    tiny = (TINY, "tiny.py")
    good = TINY_FIELDS

    def without(name: str) -> dict[str, str]:
        return {k: v for k, v in good.items() if k != name}

    cases: list[tuple[tuple[bytes, str] | None, dict[str, str], str, str]] = [
        (tiny, without("name"), "name", "^'name' is required$"),
        (tiny, {**good, "name": "  "}, "name", "^'name' must not be blank$"),
        (tiny, {**good, "name": "x" * 256}, "name", "at most 255"),
        (tiny, without("task"), "task", "^'task' is required$"),
        (tiny, {**good, "task": ""}, "task", "must not be blank"),
        (tiny, {**good, "task": "VIDEO"}, "task",
         "^'task' is 'VIDEO'; expected one of IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION, TABULAR_REGRESSION$"),
        (tiny, without("class_name"), "class_name", "^'class_name' is required$"),
        (tiny, {**good, "class_name": "My Model"}, "class_name", "a Python identifier"),
        (tiny, {**good, "class_name": "class"}, "class_name", "a Python identifier"),
        (tiny, {**good, "access": "SECRET"}, "access", "^'access' is 'SECRET'; expected one of PUBLIC, PRIVATE$"),
        (tiny, {**good, "access": ""}, "access", "must not be blank"),
        (tiny, {**good, "dependencies": '["numpy"]'}, "dependencies", "must be a JSON object .* got list"),
        (tiny, {**good, "dependencies": "{numpy: 1}"}, "dependencies", "^'dependencies' is not valid JSON"),
        (tiny, {**good, "dependencies": '{"numpy": 2}'}, "dependencies",
         "^'dependencies': the version of 'numpy' must be a non-blank string such as \"1.5.2\", got 2$"),
        (tiny, {**good, "dependencies": '{"numpy": null}'}, "dependencies", "got null$"),
        (tiny, {**good, "dependencies": '{"numpy": " "}'}, "dependencies", "non-blank string"),
        (tiny, {**good, "dependencies": '{"numpy": "1\\n2"}'}, "dependencies", "one line"),
        (tiny, {**good, "dependencies": '{"no such/package": "1"}'}, "dependencies", "is not a package name"),
        (tiny, {**good, "colour": "red"}, "colour", "^unknown field 'colour'"),
        (None, good, "file", "^'file' is required"),
        (None, {**good, "file": "tiny.py"}, "file", "^'file' came as a text field"),
        ((TINY, "tiny.txt"), good, "file",
         "^'file' must be a Python source file whose name ends in .py, got 'tiny.txt'$"),
        ((TINY, ""), good, "file", "got 'no file name'"),
        ((b"", "empty.py"), good, "file", r"^empty\.py: the file is empty"),
        ((b" \n\n\t", "blank.py"), good, "file", r"^blank\.py: the file is empty"),
        (("# caf\xe9\n".encode("latin-1") + TINY, "latin.py"), good, "file",
         r"^latin\.py: not UTF-8 text \(byte 5 is b'\\xe9'\); save it as UTF-8$"),
    ]  # fmt: skip
    for file, fields, field, message in cases:
        error = error_of(upload(dev, file, **fields), 400)
        assert error["field"] == field, (fields, error)
        assert re.search(message, error["message"]), error["message"]
    as_json = client.post("/api/v1/models", json=TINY_FIELDS, headers=dev)
    assert error_of(as_json, 400)["message"].startswith("send the template as 'Content-Type: multipart/form-data'")
    assert stored_files(settings) == []
    assert client.get("/api/v1/models", headers=dev).json == {"models": []}

    # Blank or absent dependencies mean none; access defaults to PRIVATE.
    created = upload(dev, tiny, **TINY_FIELDS, dependencies=" ")
    assert created.status_code == 201, created.json
    assert (created.json["dependencies"], created.json["access"], created.json["knob_config"]) == (
        {}, "PRIVATE", TINY_KNOBS
    )  # fmt: skip


@sqlite_only
def test_broken_templates_are_refused_with_their_reason(
    client: FlaskClient, upload: Upload, root: Headers, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A template's error message goes back to the client: the server's secrets must not reach it.
    monkeypatch.setenv("BAOBAB_SECRET_KEY", "do-not-leak-this-key")
    leaky = b"import os\nraise RuntimeError('key=' + repr(os.environ.get('BAOBAB_SECRET_KEY')))\n"
    cases: list[tuple[bytes, str, str, str]] = [
        (b"def broken(:\n    pass\n", "syntax.py", "X",
         r'^syntax\.py: the template is not valid Python:\n  File "syntax\.py", line 1\n    def broken\(:\n'
         r".*\nSyntaxError: invalid syntax$"),
        ((TEMPLATES / "import_error.py").read_bytes(), "needs.py", "X",
         r'^needs\.py: importing the template failed:\nTraceback \(most recent call last\):\n  File "needs\.py", '
         r"line 3, in <module>\n.*\nModuleNotFoundError: No module named 'baobab_no_such_package'$"),
        (TINY, "tiny.py", "Nope",
         r"^tiny\.py: no class 'Nope'; classes defined in the file: Incomplete, InvertedRange, NotADict, NotAModel, "
         r"RaisingKnobs, Tiny$"),
        (TINY, "tiny.py", "NOT_A_CLASS", r"^tiny\.py: 'NOT_A_CLASS' is a int, not a class$"),
        (TINY, "tiny.py", "NotAModel",
         r"^tiny\.py: class 'NotAModel' does not derive from baobab\.model\.BaseModel; declare it as "),
        (TINY, "tiny.py", "Incomplete", r"^tiny\.py: class 'Incomplete' does not implement load_parameters, predict$"),
        (TINY, "tiny.py", "InvertedRange",
         r"^InvertedRange\.get_knob_config\(\) returned a bad config: knob 'lr': FloatKnob: value_min=0\.1 is "
         r"greater than value_max=0\.001$"),
        (TINY, "tiny.py", "RaisingKnobs",
         r'^RaisingKnobs\.get_knob_config\(\) raised:\nTraceback .*\n  File "tiny\.py", line \d+, in get_knob_config'
         r"\n.*NameError: name 'undefined_knob_name' is not defined$"),
        (TINY, "tiny.py", "NotADict", r"^NotADict\.get_knob_config\(\) returned a bad config: a knob config must be"),
        ((TEMPLATES / "exits.py").read_bytes(), "exits.py", "X",
         r'^exits\.py: loading the template raised:\n.*File "exits\.py", line 5, in <module>\n.*\nSystemExit: 4$'),
        (b"import os\nos._exit(3)\n", "quits.py", "X",
         r"^quits\.py: the process loading the template exited with status 3 before it answered"),
        ((TEMPLATES / "crash.py").read_bytes(), "crash.py", "X",
         r"^crash\.py: the process loading the template was killed by signal SIGSEGV before it answered "
         r'\(did the template crash Python\?\); its last output:\n(.*\n)*.*File "crash\.py", line 6 in <module>'),
        (leaky, "leaky.py", "X", r"RuntimeError: key=None$"),
    ]  # fmt: skip
    for source, file_name, class_name, message in cases:
        fields = {**TINY_FIELDS, "class_name": class_name}
        error = error_of(upload(root, (source, file_name), **fields), 400)
        assert error["field"] == "file", error
        assert re.search(message, error["message"], re.DOTALL), error["message"]
        # The server's temporary paths never show: the file is named as the client sent it.
        assert "baobab-upload-" not in error["message"] and "/template.py" not in error["message"], error["message"]
    assert stored_files(settings) == []
    assert client.get("/api/v1/models", headers=root).json == {"models": []}


def test_a_model_space_is_checked_at_upload(client: FlaskClient, upload: Upload, root: Headers) -> None:
    """The check process defines the space (every mutator bound, every candidate tried) and traces one random
    instance; the knobs are its decisions plus the training knobs, and a space defined wrong is refused with
    the mutator and node named."""
    source = (TEMPLATES / "spaces.py").read_bytes()
    created = upload(root, (source, "spaces.py"), name="searched", task="IMAGE_CLASSIFICATION", class_name="Searched")
    assert created.status_code == 201, created.json
    assert created.json["knob_config"] == {
        "act": {"type": "CategoricalKnob", "values": ["relu", "tanh"]},
        "skip_out": {"type": "CategoricalKnob", "values": ["relu_1", "relu"]},
        "epochs": {"type": "FixedKnob", "value": 1},
    }
    cases = {
        "NoMatch": r"SpaceError: OperatorMutator 'conv' matches no node of the base; its nodes: fc1, relu, fc2, "
        r"relu_1, out$",
        "BadCandidate": r"SpaceError: OperatorMutator 'pair': candidate 'bi' \(Bilinear\) cannot replace node 'fc2', "
        r"which passes 1 positional argument\(s\): forward\(input1: torch.Tensor, input2: torch.Tensor\)",
        "Untraceable": r"SpaceError: torch.fx cannot trace the base Branchy: TraceError: symbolically traced variables "
        r"cannot be used as inputs to control flow \(at spaces.py:\d+: if x.sum\(\) > 0:\)$",
    }
    for class_name, message in cases.items():
        refused = upload(
            root, (source, "spaces.py"), name=class_name, task="IMAGE_CLASSIFICATION", class_name=class_name
        )
        error = error_of(refused, 400)
        assert error["field"] == "file"
        assert error["message"].startswith(f"{class_name}.get_knob_config() raised:\nTraceback"), error["message"]
        assert re.search(message, error["message"], re.DOTALL), error["message"]


def _running(command: list[str]) -> bool:
    """Whether a live process runs ``command``, as this process's ``/proc`` shows them.

    By command line, not pid: the template runs in a PID namespace of its own, so the
    pid it sees of its helper is not the one the host knows.
    """
    wanted = "\0".join(command).encode() + b"\0"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() == wanted:
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
                if state not in ("Z", "X"):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            continue
    return False


@sqlite_only
def test_a_template_that_never_loads_is_stopped_with_what_it_started(
    app: Flask,
    client: FlaskClient,
    upload: Upload,
    root: Headers,
    settings: Settings,
    signal_dir: Path,
) -> None:
    app.config[_models.CHECK_TIMEOUT_CONFIG] = 3
    # Out of the platform's home and of /tmp, which a template cannot touch.
    pid_file = signal_dir / "helper.pid"
    helper = ["sleep", f"120.{time.time_ns() % 10**9}"]  # a command line no other process has
    spinner = (
        "import subprocess, time\n"
        f"helper = subprocess.Popen({helper!r})\n"
        f"open({str(pid_file)!r}, 'w').write(str(helper.pid))\n"
        "print('spinning now', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.01)\n"
    ).encode()
    started = time.monotonic()
    error = error_of(upload(root, (spinner, "spin.py"), **TINY_FIELDS), 400)
    elapsed = time.monotonic() - started
    assert error["field"] == "file"
    assert error["message"].startswith(
        "spin.py: loading the template took longer than 3 s, the limit of the upload check, and was stopped"
    ), error["message"]
    assert elapsed >= 3, elapsed  # not stopped before its limit; it never ends by itself
    assert "spinning now" in error["message"]  # its output, which the helper was started before
    assert pid_file.read_text()  # the helper was started
    wait_until(lambda: not _running(helper), timeout=10, what="the helper the template started to be gone")
    assert stored_files(settings) == []


@sqlite_only
def test_too_large_is_a_json_413(settings: Settings, root: Headers, monkeypatch: pytest.MonkeyPatch) -> None:
    # Over the server's upload limit: encoded in memory, the test client would spool it to a file it never closes.
    fields = {**TINY_FIELDS, "file": FileStorage(io.BytesIO(TINY + b"#" * 2 * 2**20), "big.py")}
    boundary, body = encode_multipart(fields)
    small = create_app(dataclasses.replace(settings, max_upload_mb=1))
    try:
        client = small.test_client()
        response = client.post(
            "/api/v1/models", data=body, headers=root, content_type=f"multipart/form-data; boundary={boundary}"
        )
        error = error_of(response, 413)
        assert error["code"] == "request_entity_too_large"
        assert "limit of 1 MiB" in error["message"]
        # Over the template limit, under the server's.
        monkeypatch.setattr(_models, "MAX_TEMPLATE_BYTES", 2**20 // 2)
        boundary, body = encode_multipart({**fields, "file": FileStorage(io.BytesIO(TINY + b"#" * 2**19), "big.py")})
        response = client.post(
            "/api/v1/models", data=body, headers=root, content_type=f"multipart/form-data; boundary={boundary}"
        )
        error = error_of(response, 413)
        assert error["message"] == (
            "big.py is larger than 512 KiB, the limit for a model template; keep data out of the template (read it "
            "in train())"
        )
    finally:
        small.extensions["baobab"].engine.dispose()
    assert stored_files(settings) == []


def test_who_may_do_what(client: FlaskClient, upload: Upload, add_user: AddUser, root: Headers) -> None:
    _, alice = add_user(UserRole.MODEL_DEVELOPER)
    _, bob = add_user(UserRole.MODEL_DEVELOPER)
    _, app_dev = add_user(UserRole.APP_DEVELOPER)
    _, admin = add_user(UserRole.ADMIN)

    def create(headers: Headers, **fields: str) -> int:
        response = upload(headers, (TINY, "tiny.py"), **{**TINY_FIELDS, **fields})
        assert response.status_code == 201, response.json
        return response.json["id"]

    private = create(alice, name="alice private")
    shared = create(alice, name="alice public", access="PUBLIC")
    admins = create(admin, name="admin private", task="IMAGE_CLASSIFICATION")
    refused = error_of(upload(app_dev, (TINY, "tiny.py"), **TINY_FIELDS), 403)
    assert refused["message"] == (
        "this needs the role MODEL_DEVELOPER or SUPERADMIN or ADMIN; "
        "user 'app_developer-3@example.com' is APP_DEVELOPER"
    )

    def listed(headers: Headers, query: str = "") -> list[int]:
        response = client.get(f"/api/v1/models{query}", headers=headers)
        assert response.status_code == 200, response.json
        return [m["id"] for m in response.json["models"]]

    assert listed(alice) == [private, shared]
    assert listed(bob) == listed(app_dev) == [shared]
    assert listed(admin) == listed(root) == [private, shared, admins]
    assert listed(root, "?task=IMAGE_CLASSIFICATION") == [admins]
    assert listed(alice, "?task=IMAGE_CLASSIFICATION") == []
    assert listed(bob, "?task=TABULAR_CLASSIFICATION") == [shared]
    assert error_of(client.get("/api/v1/models?task=VIDEO", headers=bob), 400)["field"] == "task"
    bad_parameter = error_of(client.get("/api/v1/models?owner=1", headers=bob), 400)
    assert (bad_parameter["field"], bad_parameter["message"]) == (
        "owner", "unknown query parameter 'owner'; known parameters: task"
    )  # fmt: skip

    # Reading: own, other's PUBLIC and (for admins) everything answer; other's PRIVATE is a 404.
    visible = {
        "alice": (alice, {private, shared}), "bob": (bob, {shared}), "app_dev": (app_dev, {shared}),
        "admin": (admin, {private, shared, admins}), "root": (root, {private, shared, admins}),
    }  # fmt: skip
    for who, (headers, ids) in visible.items():
        for model_id in (private, shared, admins):
            for path in (f"/api/v1/models/{model_id}", f"/api/v1/models/{model_id}/file"):
                response = client.get(path, headers=headers)
                if model_id in ids:
                    assert response.status_code == 200, (who, path, response.get_data(as_text=True))
                else:
                    assert error_of(response, 404)["message"] == f"no model with id {model_id}", (who, path)
    assert client.get(f"/api/v1/models/{shared}/file", headers=app_dev).data == TINY

    # Deleting: someone else's PRIVATE one is invisible (404), someone else's PUBLIC one is forbidden (403).
    for headers in (bob, app_dev):
        assert error_of(client.delete(f"/api/v1/models/{private}", headers=headers), 404)["code"] == "not_found"
        forbidden = error_of(client.delete(f"/api/v1/models/{shared}", headers=headers), 403)
        assert forbidden["message"] == (
            f"model {shared} belongs to another user; only its owner or an admin may delete it"
        )
    assert error_of(client.delete(f"/api/v1/models/{admins}", headers=alice), 404)["code"] == "not_found"
    assert listed(root) == [private, shared, admins]
    assert client.delete(f"/api/v1/models/{shared}", headers=alice).status_code == 204  # the owner
    assert client.delete(f"/api/v1/models/{private}", headers=admin).status_code == 204  # an admin, not the owner
    assert client.delete(f"/api/v1/models/{admins}", headers=root).status_code == 204
    assert listed(root) == []
    assert error_of(client.delete(f"/api/v1/models/{shared}", headers=alice), 404)["code"] == "not_found"

    # No token, no answer.
    for method, path in [
        ("GET", "/api/v1/models"), ("POST", "/api/v1/models"), ("GET", f"/api/v1/models/{private}"),
        ("GET", f"/api/v1/models/{private}/file"), ("DELETE", f"/api/v1/models/{private}"),
    ]:  # fmt: skip
        assert error_of(client.open(path, method=method), 401)["code"] == "unauthorized"


def test_a_model_a_train_job_uses_cannot_be_deleted(
    app: Flask, client: FlaskClient, upload: Upload, add_user: AddUser, settings: Settings
) -> None:
    user, dev = add_user(UserRole.MODEL_DEVELOPER)
    model = upload(dev, (TINY, "tiny.py"), **TINY_FIELDS).json["id"]
    with session_scope(app.extensions["baobab"].engine) as session:
        dataset = Dataset(
            owner_id=user["id"], name="d", format=DatasetFormat.TABULAR, artifact_path="datasets/x/data.csv",
            size_bytes=1, checksum="0" * 64,
        )  # fmt: skip
        job = TrainJob(
            owner_id=user["id"], app="app", app_version=1, task=Task.TABULAR_CLASSIFICATION,
            train_dataset=dataset, val_dataset=dataset, budget={},
        )  # fmt: skip
        session.add(SubJob(train_job=job, model_template_id=model, strategy="random", seed=1))
    conflict = error_of(client.delete(f"/api/v1/models/{model}", headers=dev), 409)
    assert conflict == {
        "code": "conflict", "field": None,
        "message": f"model {model} is used by a train job and cannot be deleted; delete the job first",
    }  # fmt: skip
    assert client.get(f"/api/v1/models/{model}/file", headers=dev).data == TINY
    assert len(stored_files(settings)) == 1
    with session_scope(app.extensions["baobab"].engine) as session:
        session.delete(session.get(TrainJob, job.id))
    assert client.delete(f"/api/v1/models/{model}", headers=dev).status_code == 204
    assert stored_files(settings) == []


@sqlite_only
def test_upload_through_a_real_http_server(app: Flask, settings: Settings) -> None:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    base = f"http://127.0.0.1:{server.port}/api/v1"

    def call(method: str, path: str, data: bytes | None = None, headers: Headers | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
        try:
            with opener.open(request, timeout=60) as response:
                return response.status, (response.headers, response.read())
        except urllib.error.HTTPError as e:
            with e:
                return e.code, (e.headers, e.read())

    try:
        credentials = json.dumps({"email": settings.admin_email, "password": settings.admin_password}).encode()
        status, (_, body) = call("POST", "/tokens", credentials, {"Content-Type": "application/json"})
        assert status == 201
        auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}

        fields = {**SKLEARN_FIELDS, "access": "PUBLIC", "file": FileStorage(io.BytesIO(SKLEARN), "sklearn_tabular.py")}
        boundary, form = encode_multipart(fields)
        content_type = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        status, (headers, body) = call("POST", "/models", form, {**auth, **content_type})
        assert (status, headers["Content-Type"]) == (201, "application/json"), body
        model = json.loads(body)
        assert (model["class_name"], model["access"], sorted(model["knob_config"])) == (
            "SkTabularClassifier", "PUBLIC", ["C", "class_weight", "fit_intercept", "max_iter"]
        )  # fmt: skip

        missing = {**fields, "class_name": "Missing", "file": FileStorage(io.BytesIO(SKLEARN), "sklearn_tabular.py")}
        boundary, form = encode_multipart(missing)
        status, (_, body) = call(
            "POST", "/models", form, {**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        error = json.loads(body)["error"]
        assert (status, error["field"]) == (400, "file")
        assert (
            error["message"]
            == "sklearn_tabular.py: no class 'Missing'; classes defined in the file: SkTabularClassifier"
        )

        status, (_, body) = call("GET", "/models?task=TABULAR_CLASSIFICATION", headers=auth)
        assert (status, json.loads(body)) == (200, {"models": [model]})
        status, (headers, body) = call("GET", f"/models/{model['id']}/file", headers=auth)
        assert (status, body, headers["Content-Type"]) == (200, SKLEARN, "text/x-python; charset=utf-8")
        status, (_, body) = call("GET", "/models")
        assert (status, json.loads(body)["error"]["code"]) == (401, "unauthorized")
        status, (_, body) = call("GET", "/openapi.json")
        assert status == 200 and "/api/v1/models/{model_id}/file" in json.loads(body)["paths"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
