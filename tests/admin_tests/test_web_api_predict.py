"""``POST /api/v1/inference_jobs/<id>/predict``: the playground's relay to a predictor, JSON or uploaded images."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from flask import Flask, Response, request
from flask.testing import FlaskClient
from PIL import Image
from train_job_world import add_model, job_body, upload_dataset
from werkzeug.serving import BaseWSGIServer, make_server

from baobab import Settings
from baobab.admin import create_app
from baobab.admin._inference_jobs import hash_api_key
from baobab.model import Task
from baobab.store import InferenceJob, InferenceJobStatus, UserRole, session_scope, write_image_files
from baobab.testing import post_raw, serve_in_thread

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
KEY = "good-key"


def error(code: str, message: str, field: str | None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def _answer(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


class FakePredictor:
    """A predictor on loopback that checks the key like the real one and answers one label per query."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        app = Flask("fake-predictor")

        @app.post("/predict")
        def predict() -> Response:
            if request.headers.get("Authorization") != f"Bearer {KEY}":
                error = {"code": "unauthorized", "message": "wrong API key for this inference job", "field": None}
                return Response(json.dumps({"error": error}), status=401, mimetype="application/json")
            body = request.get_json()
            self.received.append(body)
            if body["queries"] == ["bad"]:
                error = {
                    "code": "bad_request",
                    "message": "queries[0]: expected a list of numbers",
                    "field": "queries[0]",
                }
                return Response(json.dumps({"error": error}), status=400, mimetype="application/json")
            return Response(
                json.dumps({"predictions": [len(str(q)) for q in body["queries"]]}), mimetype="application/json"
            )

        self.server: BaseWSGIServer = make_server("127.0.0.1", 0, app)
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def predictor() -> Iterator[FakePredictor]:
    fake = FakePredictor()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    thread.join()


def _inference_job(
    app: Flask,
    client: FlaskClient,
    owner: tuple[dict[str, Any], Headers],
    *,
    url: str | None,
    data: bytes | None = None,
    status: InferenceJobStatus = InferenceJobStatus.RUNNING,
    public: bool = False,
) -> int:
    """An inference job row on a train job of ``owner`` (tabular, or images when ``data`` is a zip)."""
    user, headers = owner
    engine = app.extensions["baobab"].engine
    if data is None:
        dataset = upload_dataset(client, headers)
        model = add_model(engine, user["id"])
        body = job_body(dataset, dataset, [model])
    else:
        dataset = upload_dataset(client, headers, data=data, data_format="IMAGE_FILES")
        model = add_model(engine, user["id"], task=Task.IMAGE_CLASSIFICATION)
        body = job_body(dataset, dataset, [model], app="pics", task="IMAGE_CLASSIFICATION")
    train_job = client.post("/api/v1/train_jobs", json=body, headers=headers).json
    job = InferenceJob(
        owner_id=user["id"], train_job_id=train_job["id"], status=status, api_key_hash=hash_api_key(KEY),
        predictor_url=url, public=public,
    )  # fmt: skip
    with session_scope(engine) as session:
        session.add(job)
    return job.id


def _png(size: tuple[int, int], color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def owner(add_user: AddUser) -> tuple[dict[str, Any], Headers]:
    return add_user(UserRole.APP_DEVELOPER)


def test_json_queries_go_to_the_predictor_with_the_key(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], predictor: FakePredictor
) -> None:
    job_id = _inference_job(app, client, owner, url=predictor.url)
    url = f"/api/v1/inference_jobs/{job_id}/predict"
    headers = {**owner[1], "X-Api-Key": KEY}
    answer = client.post(url, json={"queries": [[1, 2], [3, 4, 5]]}, headers=headers)
    assert answer.status_code == 200, answer.json
    assert answer.json == {"predictions": [6, 9]}
    assert predictor.received == [{"queries": [[1, 2], [3, 4, 5]]}]

    refused = client.post(url, json={"queries": ["bad"]}, headers=headers)  # the predictor's 400 comes back as it is
    assert refused.status_code == 400
    assert refused.json["error"] == {
        "code": "bad_request", "message": "queries[0]: expected a list of numbers", "field": "queries[0]"
    }  # fmt: skip


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_a_missing_or_wrong_key_is_a_403_on_api_key(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], predictor: FakePredictor, key: str | None
) -> None:
    job_id = _inference_job(app, client, owner, url=predictor.url)
    headers = owner[1] if key is None else {**owner[1], "X-Api-Key": key}
    answer = client.post(f"/api/v1/inference_jobs/{job_id}/predict", json={"queries": [[1]]}, headers=headers)
    assert answer.status_code == 403  # a 401 would sign the page out
    assert answer.json["error"]["field"] == "api_key"
    # One hint, the relay's own: the predictor's names its Authorization header, which the relay's caller never sends.
    assert answer.json["error"]["message"] == (
        f"inference job {job_id} is not public: send its API key in the X-Api-Key header "
        "(the key was shown once, when the inference job was created)"
        if key is None
        else f"wrong API key for inference job {job_id} (sent in the X-Api-Key header)"
    )


def test_uploaded_images_become_queries_of_the_training_size_and_mode(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], predictor: FakePredictor, tmp_path: Path
) -> None:
    grey = np.zeros((3, 4, 5), dtype=np.uint8)  # three 4x5 (H x W) greyscale images
    zip_bytes = write_image_files(tmp_path / "grey.zip", grey, [0, 1, 0]).read_bytes()
    job_id = _inference_job(app, client, owner, url=predictor.url, data=zip_bytes)
    files = [(io.BytesIO(_png((10, 8), (255, 255, 255))), "white.png"), (io.BytesIO(_png((5, 4), (0, 0, 0))), "b.png")]
    answer = client.post(
        f"/api/v1/inference_jobs/{job_id}/predict",
        data={"file": files},
        headers={**owner[1], "X-Api-Key": KEY},
        content_type="multipart/form-data",
    )
    assert answer.status_code == 200, answer.json
    white, black = predictor.received[0]["queries"]
    assert np.asarray(white).shape == (4, 5) and np.asarray(black).shape == (4, 5)
    assert np.all(np.asarray(white) == 255) and np.all(np.asarray(black) == 0)

    not_an_image = client.post(
        f"/api/v1/inference_jobs/{job_id}/predict",
        data={"file": [(io.BytesIO(_png((5, 4), (0, 0, 0))), "ok.png"), (io.BytesIO(b"GIF89a?"), "broken.gif")]},
        headers={**owner[1], "X-Api-Key": KEY},
        content_type="multipart/form-data",
    )
    assert not_an_image.status_code == 400
    assert not_an_image.json["error"]["field"] == "file[1]"
    assert not_an_image.json["error"]["message"].startswith("file[1] (broken.gif) is not an image Pillow can read")
    unknown = client.post(
        f"/api/v1/inference_jobs/{job_id}/predict",
        data={"file": [(io.BytesIO(b"just some text"), "notes.txt")]},
        headers={**owner[1], "X-Api-Key": KEY},
        content_type="multipart/form-data",
    )
    assert unknown.status_code == 400
    # Pillow's own message names its in-memory buffer (<_io.BytesIO object at 0x...>), not the file.
    assert unknown.json["error"]["message"] == (
        "file[0] (notes.txt) is not an image Pillow can read: no image format Pillow knows"
    )


def test_images_for_a_tabular_job_and_other_bodies_are_refused(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], predictor: FakePredictor
) -> None:
    job_id = _inference_job(app, client, owner, url=predictor.url)
    url = f"/api/v1/inference_jobs/{job_id}/predict"
    image = client.post(
        url, data={"file": (io.BytesIO(_png((2, 2), (0, 0, 0))), "a.png")}, headers=owner[1],
        content_type="multipart/form-data",
    )  # fmt: skip
    assert image.status_code == 400 and image.json["error"]["field"] == "file"
    assert "serves a TABULAR_CLASSIFICATION job, which takes JSON queries" in image.json["error"]["message"]
    text = client.post(url, data="queries", headers=owner[1], content_type="text/plain")
    assert text.status_code == 400
    assert text.json["error"]["message"].startswith('send JSON {"queries": [...]} as application/json')
    extra = client.post(url, data={"note": "x"}, headers=owner[1], content_type="multipart/form-data")
    assert extra.status_code == 400 and extra.json["error"]["field"] == "note"
    assert predictor.received == []


def test_a_job_that_does_not_serve_answers_409_or_502(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], predictor: FakePredictor
) -> None:
    starting = _inference_job(app, client, owner, url=None, status=InferenceJobStatus.STARTING)
    answer = client.post(f"/api/v1/inference_jobs/{starting}/predict", json={"queries": []}, headers=owner[1])
    assert answer.status_code == 409
    assert answer.json["error"]["message"] == (
        f"inference job {starting} is STARTING; it answers predictions once it is RUNNING"
    )

    gone = make_server("127.0.0.1", 0, Flask("closed"))
    closed_url = f"http://127.0.0.1:{gone.server_port}"
    gone.server_close()  # nothing listens there any more
    down = _inference_job(app, client, owner, url=closed_url, public=True)
    answer = client.post(f"/api/v1/inference_jobs/{down}/predict", json={"queries": []}, headers=owner[1])
    assert answer.status_code == 502
    assert answer.json["error"]["message"].startswith(f"the predictor of inference job {down} does not answer")


def test_someone_elses_inference_job_is_not_found(
    app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], add_user: AddUser, predictor: FakePredictor
) -> None:
    job_id = _inference_job(app, client, owner, url=predictor.url)
    _, stranger = add_user(UserRole.MODEL_DEVELOPER)
    answer = client.post(f"/api/v1/inference_jobs/{job_id}/predict", json={"queries": [[1]]}, headers=stranger)
    assert answer.status_code == 404
    assert answer.json["error"]["message"] == f"no inference job with id {job_id}"
    assert predictor.received == []


def test_a_json_body_over_the_predict_limit_is_refused_before_it_is_read_or_relayed(
    app: Flask,
    client: FlaskClient,
    settings: Settings,
    owner: tuple[dict[str, Any], Headers],
    predictor: FakePredictor,
) -> None:
    job_id = _inference_job(app, client, owner, url=predictor.url)
    limited = create_app(dataclasses.replace(settings, max_predict_mb=1))  # a second API process, its own limit
    headers = {**owner[1], "X-Api-Key": KEY, "Content-Type": "application/json"}
    expected = error(
        "request_entity_too_large",
        "the request body is larger than the limit of 1 MiB (BAOBAB_MAX_PREDICT_MB); send fewer queries",
        None,
    )
    try:
        with serve_in_thread(limited) as url:
            relay = f"{url}/api/v1/inference_jobs/{job_id}/predict"
            # A Content-Length of 50 MB and no body: answered from the headers (the API's own cap is 512 MiB).
            assert post_raw(relay, {**headers, "Content-Length": str(50 * 2**20)}) == (413, expected)
            # A chunked body is read to one byte past the limit, no further.
            chunk = b" " * 2**16
            framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            chunks = [framed] * (2**20 // len(chunk) + 1) + [b"0\r\n\r\n"]
            assert post_raw(relay, {**headers, "Transfer-Encoding": "chunked"}, chunks) == (413, expected)
            assert predictor.received == []
            # A body of the limit goes through.
            body = json.dumps({"queries": [[1, 2]]}).encode()
            answer = requests.post(relay, data=body + b" " * (2**20 - len(body)), headers=headers, timeout=30)
            assert answer.status_code == 200, answer.text
            assert predictor.received == [{"queries": [[1, 2]]}]
    finally:
        limited.extensions["baobab"].engine.dispose()


def test_images_over_the_predict_limit_are_refused_before_they_are_read_or_relayed(
    app: Flask,
    client: FlaskClient,
    settings: Settings,
    owner: tuple[dict[str, Any], Headers],
    predictor: FakePredictor,
    tmp_path: Path,
) -> None:
    # Training images of 300x300 L: a white one makes a query of 450,600 bytes of JSON from a PNG of under 1 KB.
    zip_bytes = write_image_files(tmp_path / "big.zip", np.full((2, 300, 300), 255, np.uint8), [0, 1]).read_bytes()
    job_id = _inference_job(app, client, owner, url=predictor.url, data=zip_bytes)
    limited = create_app(dataclasses.replace(settings, max_predict_mb=1))  # a second API process, its own limit
    boundary = "limit-test-boundary"
    headers = {**owner[1], "X-Api-Key": KEY, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    request_too_large = error(
        "request_entity_too_large",
        "the request body is larger than the limit of 1 MiB (BAOBAB_MAX_PREDICT_MB); send fewer or smaller images",
        None,
    )
    try:
        with serve_in_thread(limited) as url:
            relay = f"{url}/api/v1/inference_jobs/{job_id}/predict"
            # A Content-Length of 50 MB and no body: answered from the headers (BAOBAB_MAX_UPLOAD_MB is 512 MiB).
            assert post_raw(relay, {**headers, "Content-Length": str(50 * 2**20)}) == (413, request_too_large)
            # A chunked image part is read to the limit, no further.
            part = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\n'
                "Content-Type: image/png\r\n\r\n"
            ).encode()
            chunks = [part] + [b"\0" * 2**16] * (2**20 // 2**16 + 1)
            framed = [b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks] + [b"0\r\n\r\n"]
            assert post_raw(relay, {**headers, "Transfer-Encoding": "chunked"}, framed) == (413, request_too_large)
            # A small request whose images make queries over the limit: three white images, 1.35 MB of JSON.
            png = _png((300, 300), (255, 255, 255))
            assert len(png) < 2**10

            def send(images: int) -> requests.Response:
                files = [("file", (f"white-{i}.png", png, "image/png")) for i in range(images)]
                return requests.post(relay, files=files, headers={**owner[1], "X-Api-Key": KEY}, timeout=30)

            over = send(3)
            assert (over.status_code, over.json()) == (
                413,
                error(
                    "request_entity_too_large",
                    "the queries made of file[0] to file[2] (300x300 L each) are larger than the limit of 1 MiB "
                    "(BAOBAB_MAX_PREDICT_MB); send fewer images",
                    None,
                ),
            )
            assert predictor.received == []
            # Two make 901,218 bytes: under the limit, relayed.
            under = send(2)
            assert under.status_code == 200, under.text
            (received,) = predictor.received
            assert [np.asarray(query).shape for query in received["queries"]] == [(300, 300), (300, 300)]
    finally:
        limited.extensions["baobab"].engine.dispose()
