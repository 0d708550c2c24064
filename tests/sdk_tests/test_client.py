"""``baobab.sdk.Client`` against a real admin API on loopback (see conftest.py), on both databases."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import trained_app
from werkzeug.wrappers import Request, Response

from baobab.sdk import ApiError, Client, ClientError, JobFailedError, ServerUnreachableError, WaitTimeoutError
from baobab.store import build_tabular, write_image_files

ApiServer = Any  # conftest.ApiServer: url, app, settings, root_email, root_password
USER_PASSWORD = "user-password"
ROOT_EMAIL, ROOT_PASSWORD = "root@example.com", "root-password"  # as conftest.py makes them


@pytest.fixture
def root(api_server: ApiServer) -> Iterator[Client]:
    with Client(api_server.url, timeout=30) as client:
        client.login(ROOT_EMAIL, ROOT_PASSWORD)
        yield client


def _user(root: Client, role: str, email: str) -> Client:
    root.create_user(email, USER_PASSWORD, role=role)
    client = Client(root.url, timeout=30)
    client.login(email, USER_PASSWORD)
    return client


def test_importing_the_sdk_loads_no_server_parts() -> None:
    code = (
        "import sys, baobab.sdk\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'numpy', 'pandas', 'flask', 'PIL'})\n"
        "ours = sorted(m for m in sys.modules if m.startswith('baobab.') and not m.startswith('baobab.sdk'))\n"
        "print(heavy, ours)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[] ['baobab._settings', 'baobab.error_envelope', 'baobab.exceptions']"


def test_login_and_users(api_server: ApiServer, root: Client) -> None:
    with pytest.raises(ApiError) as caught:
        Client(api_server.url).login(ROOT_EMAIL, "wrong-password")
    error = caught.value
    assert (error.status, error.code, error.field) == (401, "unauthorized", None)
    assert str(error) == "HTTP 401 unauthorized: wrong email or password"

    assert root.token and root.list_users()[0]["email"] == ROOT_EMAIL
    dev = root.create_user("Ada@Example.com", USER_PASSWORD, role="MODEL_DEVELOPER")
    assert (dev["email"], dev["role"], dev["banned"]) == ("ada@example.com", "MODEL_DEVELOPER", False)
    with pytest.raises(ApiError) as caught:
        root.create_user("ada@example.com", USER_PASSWORD, role="APP_DEVELOPER")
    assert (caught.value.status, caught.value.code, caught.value.field) == (409, "conflict", "email")
    with pytest.raises(ApiError) as caught:
        root.create_user("bob@example.com", "short", role="APP_DEVELOPER")
    assert (caught.value.status, caught.value.field) == (400, "password")
    assert "at least 8 are required" in caught.value.message
    assert [u["email"] for u in root.list_users()] == [ROOT_EMAIL, "ada@example.com"]
    assert root.get_user(dev["id"]) == dev
    assert root.update_user(dev["id"], role="APP_DEVELOPER")["role"] == "APP_DEVELOPER"

    ada = Client(api_server.url + "/api/v1/")  # a trailing /api/v1 is accepted
    answer = ada.login("ada@example.com", USER_PASSWORD)
    assert answer["user"]["role"] == "APP_DEVELOPER" and ada.token == answer["token"]
    with pytest.raises(ApiError) as caught:
        ada.list_users()
    assert caught.value.status == 403

    assert root.ban_user(dev["id"])["banned"] is True
    with pytest.raises(ApiError, match="banned") as caught:
        ada.list_datasets()  # the token stops working at once
    assert caught.value.status == 401
    assert root.unban_user(dev["id"])["banned"] is False
    with pytest.raises(ApiError, match="token ended") as caught:
        ada.list_datasets()  # and stays ended: the ban ended the tokens issued before it
    assert caught.value.status == 401
    ada.login("ada@example.com", USER_PASSWORD)
    assert ada.list_datasets() == []

    with pytest.raises(ApiError) as caught:
        Client(api_server.url).list_users()
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
    with pytest.raises(ApiError) as caught:
        root.get_user(9999)
    assert (caught.value.status, caught.value.message) == (404, "no user with id 9999")


def test_datasets(api_server: ApiServer, root: Client, tmp_path: Path) -> None:
    splits = build_tabular("iris", tmp_path / "iris").splits
    train = root.create_dataset("iris-train", splits[0].path, format="TABULAR", target="target")
    assert train["size"] == splits[0].path.stat().st_size
    assert train["checksum"] == hashlib.sha256(splits[0].path.read_bytes()).hexdigest()
    assert (train["name"], train["format"]) == ("iris-train", "TABULAR")

    # A few MB, streamed from disk: the server stores every byte.
    big = tmp_path / "big.csv"
    rng = np.random.default_rng(0)
    rows = "\n".join(",".join(f"{v:.6f}" for v in row) for row in rng.random((40_000, 8)))
    big.write_text("a,b,c,d,e,f,g,target\n" + rows + "\n")
    stored = root.create_dataset("big", str(big), format="TABULAR")
    assert stored["size"] == big.stat().st_size > 2_000_000
    assert stored["checksum"] == hashlib.sha256(big.read_bytes()).hexdigest()

    images = tmp_path / "images.zip"
    write_image_files(images, rng.integers(0, 256, (6, 8, 8), dtype=np.uint8), [0, 1, 0, 1, 0, 1])
    image_set = root.create_dataset("tiny images", images, format="IMAGE_FILES")
    assert image_set["format"] == "IMAGE_FILES"

    assert [d["id"] for d in root.list_datasets()] == [image_set["id"], stored["id"], train["id"]]
    assert root.get_dataset(train["id"]) == train

    with pytest.raises(ApiError) as caught:  # the server names the uploaded file, not its own
        root.create_dataset("wrong target", splits[0].path, format="TABULAR", target="label")
    assert (caught.value.status, caught.value.field) == (400, "file")
    assert "train.csv" in caught.value.message and "label" in caught.value.message
    with pytest.raises(ApiError) as caught:
        root.create_dataset("x", splits[0].path, format="CSV")
    assert (caught.value.status, caught.value.field) == (400, "format")
    assert "expected one of IMAGE_FILES, TABULAR" in caught.value.message
    with pytest.raises(ClientError, match=r"cannot read .*missing\.csv"):
        root.create_dataset("x", tmp_path / "missing.csv", format="TABULAR")

    other = _user(root, "APP_DEVELOPER", "app@example.com")
    assert other.list_datasets() == []
    with pytest.raises(ApiError) as caught:  # another user's dataset is answered like a missing one
        other.get_dataset(train["id"])
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    with pytest.raises(ApiError):
        other.delete_dataset(train["id"])

    assert root.delete_dataset(train["id"]) is None
    with pytest.raises(ApiError, match=f"no dataset with id {train['id']}"):
        root.get_dataset(train["id"])
    assert [d["id"] for d in root.list_datasets()] == [image_set["id"], stored["id"]]


def test_error_bodies_that_are_not_json(odd_server: Callable[[Callable[[Request], Response]], str]) -> None:
    def handler(request: Request) -> Response:
        if request.path == "/api/v1/datasets":
            return Response("<html><body><h1>502 Bad Gateway</h1>\n nginx</body></html>", 502, mimetype="text/html")
        if request.path == "/api/v1/users":
            return Response("it works", 200, mimetype="text/plain")
        body = {"error": {"code": "conflict", "message": "in use", "field": None}, "extra": 1}
        return Response(json.dumps(body), 409, mimetype="application/json")

    client = Client(odd_server(handler), token="t")
    with pytest.raises(ApiError) as caught:
        client.list_datasets()
    error = caught.value
    assert (error.status, error.code, error.field, error.body) == (502, "bad_gateway", None, None)
    assert error.message == (
        f"GET {client.url}/api/v1/datasets answered 502 BAD GATEWAY with text/html: <html><body><h1>502 Bad "
        f"Gateway</h1> nginx</body></html> (not a Baobab error; is {client.url} the right URL?)"
    )
    with pytest.raises(ClientError, match="answered 200 with text/plain, not JSON; is this the URL of a Baobab"):
        client.list_users()
    with pytest.raises(ApiError) as caught:
        client.get_model(1)
    assert (caught.value.status, caught.value.message, caught.value.body["extra"]) == (409, "in use", 1)


def test_an_unreachable_server(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(ServerUnreachableError) as caught:
        Client(url).login(ROOT_EMAIL, ROOT_PASSWORD)
    assert str(caught.value) == (
        f"cannot connect to the Baobab server at {url}: connection refused; is `baobab up` running, and is this "
        f"its URL?"
    )
    assert caught.value.url == url and isinstance(caught.value, ConnectionError)
    with pytest.raises(ServerUnreachableError, match=f"cannot connect to the predictor at {url}/x: connection refused"):
        Client().predict([[1.0]], predictor_url=f"{url}/x/")

    # A server that accepts the connection but never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        # It never answers: only the client's timeout ends the call (which would otherwise hang the test).
        with pytest.raises(ServerUnreachableError, match=r"did not answer within 0\.3 s"):
            Client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3).list_models()

    for bad in ("127.0.0.1:8100", "ftp://host/", "http://"):
        with pytest.raises(ValueError, match="is not an http:// or https:// URL; expected e.g. http://127.0.0.1:8100"):
            Client(bad)
    assert Client("http://example.com:8100/api/v1/").url == "http://example.com:8100"


TEMPLATE = '''"""A small template that imports nothing heavy, so the upload check costs little."""

from baobab.model import BaseModel, CategoricalKnob, FloatKnob, PolicyKnob


class Tiny(BaseModel):
    @staticmethod
    def get_knob_config():
        return {"lr": FloatKnob(1e-4, 1e-1, is_exp=True), "kind": CategoricalKnob(["a", "b"]),
                "quick": PolicyKnob("EARLY_STOP")}

    def train(self, dataset_path, shared_params=None, **train_args):
        pass

    def evaluate(self, dataset_path):
        return 0.5

    def predict(self, queries):
        return [0 for _ in queries]

    def dump_parameters(self):
        return {}

    def load_parameters(self, params):
        pass
'''
CSV = "x1,x2,label\n1.0,2.0,cat\n3.0,4.0,dog\n"


def test_models_train_jobs_trials_and_inference_jobs(
    root: Client, backstage: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "tiny_template.py"
    template.write_text(TEMPLATE)
    model = root.create_model(template, task="TABULAR_CLASSIFICATION", class_name="Tiny", dependencies={"numpy": "2"})
    assert (model["name"], model["class_name"], model["access"]) == ("tiny_template", "Tiny", "PRIVATE")
    assert (model["dependencies"], set(model["knob_config"])) == ({"numpy": "2"}, {"lr", "kind", "quick"})
    assert model["checksum"] == hashlib.sha256(template.read_bytes()).hexdigest()
    with pytest.raises(ApiError) as caught:
        root.create_model(template, "x", task="TABULAR_CLASSIFICATION", class_name="Missing")
    assert (caught.value.status, caught.value.field) == (400, "file") and "Missing" in caught.value.message
    assert [m["id"] for m in root.list_models(task="TABULAR_CLASSIFICATION")] == [model["id"]]
    assert root.list_models(task="IMAGE_CLASSIFICATION") == []
    assert root.get_model(model["id"]) == model
    downloaded = root.download_model(model["id"], tmp_path)
    assert downloaded.parent == tmp_path and downloaded.read_text() == TEMPLATE
    assert root.download_model(model["id"], tmp_path / "copy.py").read_text() == TEMPLATE

    (tmp_path / "train.csv").write_text(CSV)
    train = root.create_dataset("train", tmp_path / "train.csv", format="TABULAR")
    val = root.create_dataset("val", tmp_path / "train.csv", format="TABULAR")
    with pytest.raises(ApiError) as caught:
        root.create_train_job(
            "fraud",
            "TABULAR_CLASSIFICATION",
            train_dataset_id=train["id"],
            val_dataset_id=val["id"],
            model_ids=[model["id"]],
            budget={"TIME_HOURS": -1},
        )
    assert (caught.value.status, caught.value.field) == (400, "budget.TIME_HOURS")
    budget = {"MODEL_TRIAL_COUNT": 3, "GPU_COUNT": 0}
    job = root.create_train_job(
        "fraud",
        "TABULAR_CLASSIFICATION",
        train_dataset_id=train["id"],
        val_dataset_id=val["id"],
        model_ids=[model["id"]],
        budget=budget,
        train_args={"epochs": 2},
        target="label",
        strategy="random",
    )
    assert (job["app"], job["app_version"], job["status"]) == ("fraud", 1, "PENDING")
    assert (job["train_args"], job["target"], job["budget"]) == ({"epochs": 2}, "label", budget)
    assert [(s["model_id"], s["strategy"]) for s in job["sub_jobs"]] == [(model["id"], "random")]
    _the_job_options_and_their_old_form(root, train["id"], val["id"], model["id"])
    assert root.get_train_job("fraud") == root.get_train_job("fraud", 1) == job
    assert [j["id"] for j in root.list_train_jobs(app="fraud")] == [job["id"]] and root.list_train_jobs("x") == []
    with pytest.raises(ApiError, match="used by a train job") as caught:
        root.delete_model(model["id"])
    assert caught.value.status == 409
    with pytest.raises(ApiError, match="no train job for app 'nope'"):
        root.get_train_job("nope")

    assert root.get_trials("fraud") == {"trials": [], "total": 0, "page": 1, "per_page": 50}
    assert root.get_best_trials("fraud") == []
    with pytest.raises(ApiError, match="has no trained trials yet") as caught:
        root.create_inference_job("fraud")
    assert caught.value.status == 409

    # What the workers would write.
    params = {"w": np.arange(4, dtype=np.float32)}
    first = backstage.add_trial(
        job["id"], 0, "COMPLETED", 0.7, params=params, logs=("epoch 1", "epoch 2"), metrics=({"loss": 0.5},)
    )
    second = backstage.add_trial(job["id"], 1, "COMPLETED", 0.9, params=params)
    failed = backstage.add_trial(job["id"], 2, "ERRORED", error="ValueError: boom")

    page = root.get_trials("fraud", 1, sort="-score", status=["COMPLETED", "ERRORED"])
    assert [t["id"] for t in page["trials"]] == [second, first, failed] and page["total"] == 3
    assert [t["id"] for t in root.get_trials("fraud", status="ERRORED")["trials"]] == [failed]
    assert [t["id"] for t in root.get_trials("fraud", page=2, per_page=1, sort="number")["trials"]] == [first + 1]
    assert [t["id"] for t in root.iter_trials("fraud", per_page=2, sort="number")] == [first, second, failed]
    with pytest.raises(ApiError) as caught:
        root.get_trials("fraud", sort="best")
    assert (caught.value.status, caught.value.field) == (400, "sort")
    assert [(t["id"], t["score"]) for t in root.get_best_trials("fraud", k=5)] == [(second, 0.9), (first, 0.7)]

    assert root.get_trial(failed)["traceback"] == "Traceback (most recent call last):\nValueError: boom"
    logs = root.get_trial_logs(first)
    assert [line["line"] for line in logs] == ["epoch 1", "epoch 2"]
    assert [line["line"] for line in root.get_trial_logs(first, after=logs[0]["id"])] == ["epoch 2"]
    assert [m["metrics"] for m in root.get_trial_metrics(first)] == [{"loss": 0.5}]
    saved = root.download_trial_params(second, tmp_path)
    assert saved == tmp_path / f"trial-{second}.safetensors"
    assert saved.read_bytes() == backstage.artifacts.get_bytes(f"params/trial-{second}.safetensors")
    with pytest.raises(ApiError, match=f"trial {failed} has no parameters") as caught:
        root.download_trial_params(failed, tmp_path / "none.safetensors")
    assert caught.value.status == 404 and not (tmp_path / "none.safetensors").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]

    # Inference jobs; the supervisor's part is played by the backstage.
    with pytest.raises(ValueError, match="give k .* or trial_ids, not both"):
        root.create_inference_job("fraud", k=1, trial_ids=[first])
    inference = root.create_inference_job("fraud", k=1)
    assert (inference["status"], inference["app_version"], inference["public"]) == ("STARTING", 1, False)
    assert [m["trial_id"] for m in inference["members"]] == [second] and len(inference["api_key"]) >= 32
    with pytest.raises(WaitTimeoutError, match=f"inference job {inference['id']} is still STARTING after 0.2 s"):
        root.wait_for_inference_job(inference["id"], timeout=0.2, poll_interval=0.05)
    backstage.later(0.3, lambda: backstage.set_inference_job(inference["id"], "RUNNING", "http://127.0.0.1:1"))
    running = root.wait_for_inference_job(inference["id"], timeout=20, poll_interval=0.05)
    assert (running["status"], running["predictor_url"]) == ("RUNNING", "http://127.0.0.1:1")
    assert "api_key" not in root.get_inference_job(inference["id"])

    chosen = root.create_inference_job("fraud", 1, trial_ids=[first, second], public=True)
    assert sorted(m["trial_id"] for m in chosen["members"]) == [first, second] and chosen["public"] is True
    with pytest.raises(ApiError) as caught:
        root.create_inference_job("fraud", trial_ids=[failed])
    assert (caught.value.status, caught.value.field) == (400, "trial_ids[0]")
    backstage.later(0.2, lambda: backstage.set_inference_job(chosen["id"], "ERRORED", error="member 3 did not load"))
    with pytest.raises(JobFailedError, match=f"inference job {chosen['id']} is ERRORED: member 3 did not load"):
        root.wait_for_inference_job(chosen["id"], timeout=20, poll_interval=0.05)
    with pytest.raises(ClientError, match=f"inference job {chosen['id']} is ERRORED and has no predictor URL"):
        root.predict([[1.0, 2.0]], inference_job_id=chosen["id"])

    assert [j["id"] for j in root.list_inference_jobs(app="fraud")] == [chosen["id"], inference["id"]]
    stopped = root.stop_inference_job(inference["id"])
    assert stopped["status"] == "STOPPED" and stopped["stopped_at"]

    # Waiting for the train job: a time limit, then the driver's part played in the background.
    with pytest.raises(WaitTimeoutError, match="train job fraud v1 is still PENDING after 0.2 s; it goes on"):
        root.wait_for_train_job("fraud", timeout=0.2, progress=False, poll_interval=0.05)
    assert root.stop_train_job("fraud")["status"] == "STOPPING"
    capsys.readouterr()
    backstage.later(0.3, lambda: backstage.set_train_job(job["id"], "STOPPED"))
    final = root.wait_for_train_job("fraud", timeout=20, poll_interval=0.05)
    assert final["status"] == "STOPPED" and final["trial_counts"]["COMPLETED"] == 2 and final["best_score"] == 0.9
    bar = capsys.readouterr().err
    assert "fraud v1" in bar and "3/3" in bar and "status=STOPPED" in bar and "best=0.9" in bar
    assert root.stop_train_job("fraud", 1)["status"] == "STOPPED"  # finished: unchanged


def test_inference_job_versions(root: Client, backstage: Any, tmp_path: Path) -> None:
    """Canary, promotion, rollback through the client; the predictor's writes are played by the backstage."""
    low, mid, high = trained_app(root, backstage, tmp_path, "canary")
    job_id = root.create_inference_job("canary", k=1)["id"]
    first = root.get_versions(job_id)
    assert (first["revision"], first["converged"], first["rollback_to"]) == (1, False, None)
    assert [(v["name"], v["weight"], v["trial_ids"]) for v in first["versions"]] == [("v1", 1.0, [high])]

    wanted = [{"name": "v1", "trial_ids": [high]}, {"name": "v2", "trial_ids": [low, mid], "weight": 0.25}]
    with pytest.raises(WaitTimeoutError, match=f"inference job {job_id} does not serve revision 2 after 0.2 s"):
        root.set_versions(job_id, wanted, wait=True, timeout=0.2)
    backstage.later(0.3, lambda: backstage.serve_revision(job_id, 2))
    canary = root.wait_for_versions(job_id, timeout=20, poll_interval=0.05)
    assert (canary["revision"], canary["served_revision"], canary["converged"]) == (2, 2, True)
    assert [(v["name"], v["share"], v["trial_ids"]) for v in canary["versions"]] == [
        ("v1", 0.8, [high]), ("v2", 0.2, [mid, low])
    ]  # fmt: skip
    with pytest.raises(ApiError) as caught:
        root.set_versions(job_id, [{"name": "v1", "trial_ids": [high], "weight": -1}])
    assert (caught.value.status, caught.value.field) == (400, "versions[0].weight")
    assert root.get_versions(job_id) == canary  # refused: nothing changed

    promoted = root.promote_version(job_id, "v2")
    assert (promoted["revision"], [v["name"] for v in promoted["versions"]]) == (3, ["v2"])
    backstage.later(0.2, lambda: backstage.fail_revision(job_id, 3, "no member could be loaded: trial 1: boom"))
    with pytest.raises(JobFailedError, match="cannot serve revision 3: no member could be loaded: trial 1: boom; it "):
        root.wait_for_versions(job_id, timeout=20, poll_interval=0.05)
    with pytest.raises(ApiError, match=f"inference job {job_id} has no version 'v9'") as caught:
        root.promote_version(job_id, "v9")
    assert caught.value.status == 404

    back = root.rollback_versions(job_id)
    assert (back["revision"], back["versions"], back["rollback_to"]) == (4, canary["versions"], 1)
    assert root.rollback_versions(job_id)["revision"] == 5
    with pytest.raises(ApiError, match="has nothing to roll back to") as caught:
        root.rollback_versions(job_id)
    assert caught.value.status == 409
    history = root.get_revisions(job_id)
    assert [(r["revision"], r["action"]) for r in history] == [
        (5, "ROLLBACK"), (4, "ROLLBACK"), (3, "PROMOTE"), (2, "ROLLOUT"), (1, "CREATE")
    ]  # fmt: skip
    assert history[2]["error"] == "no member could be loaded: trial 1: boom"
    assert [r["revision"] for r in root.get_revisions(job_id, limit=1)] == [5]


def _the_job_options_and_their_old_form(client: Client, train: int, val: int, model: int) -> None:
    """``options=`` and ``target=`` make the job quietly; options or the target in ``train_args`` (the old forms)
    make the same job, with a DeprecationWarning at the caller's line; a bad option is an ApiError naming it."""
    args = {"app": "options", "task": "TABULAR_CLASSIFICATION", "train_dataset_id": train, "val_dataset_id": val,
            "model_ids": [model], "budget": {"MODEL_TRIAL_COUNT": 3}}  # fmt: skip
    options = {"early_stopping": "median", "fusion": {"max_group": 2}, "warm_start": False}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all
        new = client.create_train_job(**args, train_args={"epochs": 2}, target="label", options=options)
    with pytest.warns(DeprecationWarning, match=r"deprecates this form.*as options=") as caught:
        old = client.create_train_job(**args, train_args={"epochs": 2, "target": "label", **options})
    assert caught[0].filename == __file__  # the warning points at the caller
    with pytest.warns(DeprecationWarning, match=r"deprecates this form.*target column as target=") as caught:
        old_target = client.create_train_job(**args, train_args={"epochs": 2, "target": "label"}, options=options)
    assert caught[0].filename == __file__
    for job in (new, old, old_target):
        assert (job["train_args"], job["target"]) == ({"epochs": 2}, "label")
        assert (job["options"]["early_stopping"], job["options"]["fusion"]) == ("median", {"max_group": 2})
        assert job["options"]["warm_start"] is False
    with pytest.raises(ApiError) as bad:
        client.create_train_job(**args, options={"fusion": {"max_group": 0}})
    assert (bad.value.status, bad.value.field) == (400, "options.fusion.max_group")
    assert "options.fusion.max_group: must be >= 1, got 0" in str(bad.value)
    with pytest.raises(ApiError) as bad:
        client.create_train_job(**{**args, "task": "IMAGE_CLASSIFICATION"}, target="label")
    assert (bad.value.status, bad.value.field) == (400, "target")
