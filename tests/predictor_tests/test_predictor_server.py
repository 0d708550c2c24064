"""The predictor process over real HTTP: auth, validation, ensembling, micro-batching, failing members.

Two predictors serve the whole module (starting one costs seconds):

- ``reg``: a private TABULAR_REGRESSION job of three TinyRegressor members on
  scikit-learn's diabetes set, offsets 0, 10 and 50 (so leaving any one out changes
  the mean). The best one logs its batch sizes; the second raises on first value 777
  and crashes on 999; the third sleeps on 888. Member timeout 2 s, batch window 30 ms.
  Its ``/metrics`` is read around the requests of a test (the counters are cumulative).
- ``cls``: a public TABULAR_CLASSIFICATION job on breast cancer: two logistic
  regressions (SkTabularClassifier, C=1 and C=0.001) and a voter that always says 0.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from predictor_world import SK_TABULAR, TINY, Predictor, Trained, World, make_world, tabular_frame, wait_ready

from baobab.model import Task
from baobab.testing import post_raw, scrape, wait_until

OFFSETS = (0.0, 10.0, 50.0)
TIMEOUT_S = 2.0
LIMIT_MB = 1  # BAOBAB_MAX_PREDICT_MB of both predictors


@dataclass
class Served:
    url: str
    api_key: str
    members: list[Trained]
    rows: np.ndarray  # feature rows of the training set
    columns: list[str]
    batch_log: Path | None = None

    def post(self, body: Any, *, key: str | None = "default", **kwargs: Any) -> requests.Response:
        headers = {} if key is None else {"Authorization": f"Bearer {self.api_key if key == 'default' else key}"}
        if isinstance(body, (bytes, str)):
            return requests.post(f"{self.url}/predict", data=body, headers=headers, timeout=30, **kwargs)
        return requests.post(f"{self.url}/predict", json=body, headers=headers, timeout=30, **kwargs)

    def batches_logged(self) -> int:
        """How many batches the best member has been given so far."""
        assert self.batch_log is not None
        # the member writes the file at its first batch, which other tests may or may not have sent
        return len(self.batch_log.read_text().splitlines()) if self.batch_log.exists() else 0

    def local(self, index: int, queries: list[list[float]]) -> list[Any]:
        return self.members[index].model.predict(queries)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, signal_root: Path) -> Iterator[dict[str, Served]]:
    home = tmp_path_factory.mktemp("predictor-server")
    world: World = make_world(f"sqlite:///{home / 'baobab.db'}", home, max_predict_mb=LIMIT_MB)
    batch_log = Path(tempfile.mkdtemp(dir=signal_root)) / "batches.txt"  # where a confined member can write

    dataset_id, diabetes = world.tabular("diabetes")
    sub_job = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor")
    behaviours: list[dict[str, Any]] = [{"batch_log": str(batch_log)}, {"raise_on": 777, "crash_on": 999}, {}]
    behaviours[2]["sleep_on"] = 888
    regressors = [
        world.trial(sub_job, TINY, "TinyRegressor", {"offset": offset, **extra}, diabetes, score=0.5 - i / 10)
        for i, (offset, extra) in enumerate(zip(OFFSETS, behaviours, strict=True))
    ]
    reg_job, reg_key = world.inference_job([t.trial_id for t in regressors])

    dataset_id, cancer = world.tabular("breast_cancer")
    sub_job = world.train_job(Task.TABULAR_CLASSIFICATION, dataset_id, SK_TABULAR, "SkTabularClassifier")
    knobs = {"class_weight": None, "fit_intercept": True, "max_iter": 500}
    strong = world.trial(sub_job, SK_TABULAR, "SkTabularClassifier", {"C": 1.0, **knobs}, cancer, score=0.97)
    weak = world.trial(sub_job, SK_TABULAR, "SkTabularClassifier", {"C": 0.0005, **knobs}, cancer, score=0.9)
    voter_sub_job = world.train_job(Task.TABULAR_CLASSIFICATION, dataset_id, TINY, "ConstantVoter")
    voter = world.trial(voter_sub_job, TINY, "ConstantVoter", {"label": 0}, cancer, score=0.5)
    cls_job, cls_key = world.inference_job([strong.trial_id, weak.trial_id, voter.trial_id], public=True)

    predictors = [
        Predictor(world, reg_job, f"--member-timeout-s={TIMEOUT_S}", "--batch-window-ms=30"),
        Predictor(world, cls_job),
    ]
    try:
        reg_url, cls_url = (p.wait_url() for p in predictors)
        diabetes_frame, cancer_frame = tabular_frame("diabetes"), tabular_frame("breast_cancer")
        yield {
            "reg": Served(
                reg_url,
                reg_key,
                regressors,
                diabetes_frame.drop(columns="target").to_numpy(),
                [c for c in diabetes_frame.columns if c != "target"],
                batch_log,
            ),
            "cls": Served(
                cls_url,
                cls_key,
                [strong, weak, voter],
                cancer_frame.drop(columns="target").to_numpy(),
                [c for c in cancer_frame.columns if c != "target"],
            ),
        }
    finally:
        for predictor in predictors:
            predictor.close()
        world.engine.dispose()


@pytest.fixture
def reg(served: dict[str, Served]) -> Served:
    wait_ready(served["reg"].url, 3)  # a test before may have had a member restarted
    return served["reg"]


@pytest.fixture
def cls(served: dict[str, Served]) -> Served:
    return served["cls"]


def expected_mean(reg: Served, queries: list[list[float]], members: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    return np.mean([reg.local(i, queries) for i in members], axis=0)


def test_health_needs_no_key(reg: Served) -> None:
    response = requests.get(f"{reg.url}/health", timeout=5)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["members"], body["ready"], body["revision"]) == ("ok", 3, 3, 1)
    assert body["versions"] == [
        {"name": "v1", "weight": 1.0, "members": [m.trial_id for m in reg.members], "ready": 3, "replicas": 1}
    ]


def test_regression_answers_the_mean_in_query_order(reg: Served) -> None:
    queries = reg.rows[[5, 0, 42, 7, 300]].tolist()
    response = reg.post({"queries": queries})
    assert response.status_code == 200, response.text
    body = response.json()
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, queries), rtol=1e-9)
    assert body["members"] == {"answered": [m.trial_id for m in reg.members], "left_out": []}
    assert body["version"] == "v1"  # the job's one version, as every job starts
    # The members disagree by their offsets, so the mean is no one member's answer.
    np.testing.assert_allclose(body["predictions"], np.asarray(reg.local(0, queries)) + np.mean(OFFSETS))


def test_object_queries_name_every_column(reg: Served) -> None:
    rows = reg.rows[[1, 2]].tolist()
    as_objects = [dict(zip(reg.columns, row, strict=True)) for row in rows]
    as_objects[0] = dict(reversed(as_objects[0].items()))  # the order of the keys does not matter
    body = reg.post({"queries": as_objects}).json()
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, rows), rtol=1e-9)

    missing = dict(as_objects[1])
    del missing["bmi"]
    response = reg.post({"queries": [as_objects[0], missing]})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "queries[1]"
    assert "'bmi'" in response.json()["error"]["message"]

    response = reg.post({"queries": [{**as_objects[0], "height": 1.0}]})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "queries[0]"
    assert "unknown column(s) 'height'" in response.json()["error"]["message"]


def test_a_missing_or_wrong_key_is_refused(reg: Served) -> None:
    query = {"queries": [reg.rows[0].tolist()]}
    for key in (None, "not-the-key", ""):
        response = reg.post(query, key=key)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "unauthorized"
    response = requests.post(
        f"{reg.url}/predict", json=query, headers={"Authorization": f"Basic {reg.api_key}"}, timeout=30
    )
    assert response.status_code == 401
    assert reg.post(query).status_code == 200


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{not json", None, "not valid JSON"),
        (b'{"queries": [[NaN, 1]]}', None, "NaN is not valid JSON"),
        ([1, 2], None, "must be a JSON object"),
        ({}, "queries", "'queries' is required"),
        ({"queries": "many"}, "queries", "must be a list"),
        ({"queries": [], "k": 2}, "k", "unknown field 'k'"),
        ({"queries": [[0.0] * 10, [0.0] * 9]}, "queries[1]", "has 9 value(s); expected a list of 10 numbers"),
        ({"queries": [[0.0] * 10, [0.0] * 10, [0.0] * 9 + ["x"]]}, "queries[2]", "value 9 is a string"),
        ({"queries": [[0.0] * 10, "row"]}, "queries[1]", "got a string"),
        ({"queries": [[0.0] * 9 + [1e300]]}, "queries[0]", "finite and fit a float32"),
    ],
)
def test_malformed_bodies_and_queries_are_400_naming_the_field(
    reg: Served, body: Any, field: str | None, words: str
) -> None:
    response = reg.post(body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["field"] == field
    assert words in error["message"]


def test_no_queries_no_predictions(reg: Served) -> None:
    assert reg.post({"queries": []}).json() == {
        "predictions": [],
        "version": "v1",
        "members": {"answered": [], "left_out": []},
    }


def test_concurrent_requests_are_sent_as_batches_and_answered_apart(reg: Served) -> None:
    before = reg.batches_logged()
    clients = 16
    barrier = threading.Barrier(clients)
    answers: dict[int, Any] = {}

    def client(i: int) -> None:
        barrier.wait()
        answers[i] = reg.post({"queries": [reg.rows[i].tolist()]}).json()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Read before predicting locally: the local copy of the member logs its batches too.
    batches = [int(line) for line in reg.batch_log.read_text().splitlines()[before:]]
    for i in range(clients):
        np.testing.assert_allclose(answers[i]["predictions"], expected_mean(reg, [reg.rows[i].tolist()]), rtol=1e-9)
    assert sum(batches) == clients
    assert len(batches) < clients and max(batches) > 1, batches


def test_a_large_request_is_cut_into_batches_and_reassembled(reg: Served) -> None:
    queries = reg.rows[:150].tolist()  # more than a batch (64)
    body = reg.post({"queries": queries}).json()
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, queries), rtol=1e-9)


def test_a_member_that_raises_is_left_out_and_keeps_serving(reg: Served) -> None:
    queries = reg.rows[:3].tolist()
    queries[1][0] = 777
    body = reg.post({"queries": queries}).json()
    failing = reg.members[1].trial_id
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, queries, (0, 2)), rtol=1e-9)
    assert body["members"]["answered"] == [reg.members[0].trial_id, reg.members[2].trial_id]
    (left_out,) = body["members"]["left_out"]
    assert left_out["trial_id"] == failing
    assert left_out["reason"].startswith("predict() raised ValueError: cannot predict first value [777]")
    # Not restarted: it answers the very next batch.
    assert reg.post({"queries": reg.rows[:1].tolist()}).json()["members"]["answered"] == [
        m.trial_id for m in reg.members
    ]


def test_a_member_that_hangs_is_left_out_after_the_timeout_and_restarted(reg: Served) -> None:
    queries = reg.rows[:2].tolist()
    queries[0][0] = 888
    # The member sleeps 60 s; a request that waited for it would fail on the client's 30 s timeout.
    body = reg.post({"queries": queries}).json()
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, queries, (0, 1)), rtol=1e-9)
    (left_out,) = body["members"]["left_out"]
    assert left_out == {
        "trial_id": reg.members[2].trial_id,
        "reason": f"no answer within {TIMEOUT_S:g} s while predicting; the inference process was killed",
    }
    # Until it is back, it is left out with the reason; then it answers again.
    wait_ready(reg.url, 3)
    body = reg.post({"queries": reg.rows[:2].tolist()}).json()
    assert body["members"] == {"answered": [m.trial_id for m in reg.members], "left_out": []}


def test_a_member_that_crashes_is_left_out_and_restarted(reg: Served) -> None:
    queries = reg.rows[:2].tolist()
    queries[1][0] = 999
    body = reg.post({"queries": queries}).json()
    (left_out,) = body["members"]["left_out"]
    assert left_out["trial_id"] == reg.members[1].trial_id
    assert left_out["reason"] == "the inference process exited with status 3 while predicting"
    np.testing.assert_allclose(body["predictions"], expected_mean(reg, queries, (0, 2)), rtol=1e-9)
    health = requests.get(f"{reg.url}/health", timeout=5).json()
    assert health["members"] == 3
    wait_ready(reg.url, 3)
    assert reg.post({"queries": reg.rows[:1].tolist()}).json()["members"]["left_out"] == []


def test_when_every_member_fails_the_answer_is_503(reg: Served) -> None:
    queries = reg.rows[:2].tolist()
    queries[0][0] = 555  # every TinyRegressor raises on it
    response = reg.post({"queries": queries})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "service_unavailable"
    assert error["field"] is None
    for member in reg.members:
        assert f"trial {member.trial_id}: predict() raised ValueError" in error["message"]


def test_public_classification_job_votes_without_a_key(cls: Served) -> None:
    queries = cls.rows[::7].tolist()
    response = cls.post({"queries": queries}, key=None)
    assert response.status_code == 200, response.text
    body = response.json()
    votes = np.array([cls.local(i, queries) for i in range(3)])
    majority = (votes.sum(axis=0) >= 2).astype(int).tolist()
    assert body["predictions"] == majority
    assert body["members"]["answered"] == [m.trial_id for m in cls.members]
    # The members do disagree here, and the always-0 voter is outvoted where the two others agree on 1.
    assert (votes[0] != votes[1]).any() and 1 in body["predictions"]
    assert cls.post({"queries": queries}, key="anything").status_code == 200


def test_unknown_routes_and_methods_answer_json_errors(cls: Served) -> None:
    response = requests.get(f"{cls.url}/predict", timeout=5)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    response = requests.get(f"{cls.url}/nope", timeout=5)
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": response.json()["error"]["message"],
        "field": None,
    }


def test_metrics_count_requests_batches_and_members_left_out_and_need_no_key(reg: Served) -> None:
    metrics = f"{reg.url}/metrics"
    before = scrape(metrics)  # a private job: /predict needs its key, /metrics does not
    queries = reg.rows[:3].tolist()
    raising = [list(query) for query in queries]
    raising[1][0] = 777  # the second member raises: left out of that batch
    assert reg.post({"queries": queries}).status_code == 200
    assert reg.post({"queries": raising}).status_code == 200
    assert reg.post({"queries": queries}, key="not-the-key").status_code == 401
    assert reg.post({"queries": "many"}).status_code == 400
    assert requests.get(f"{reg.url}/health", timeout=5).status_code == 200
    after = scrape(metrics)

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    served, refused = {"version": "v1"}, {"version": "none"}  # refused before a version was picked
    assert moved("baobab_predictor_requests_total", status="200", **served) == 2
    assert moved("baobab_predictor_requests_total", status="401", **refused) == 1
    assert moved("baobab_predictor_requests_total", status="400", **refused) == 1
    # /health and /metrics are no traffic
    assert (
        moved("baobab_predictor_request_seconds_count", **served)
        + moved("baobab_predictor_request_seconds_count", **refused)
        == 4
    )
    assert moved("baobab_predictor_request_seconds_sum", **served) > 0
    assert moved("baobab_predictor_batch_size_count") == 2  # refused requests never reach a batch
    assert moved("baobab_predictor_batch_size_sum") == 6
    assert moved("baobab_predictor_batch_seconds_count") == 2
    left_out = "baobab_predictor_members_left_out_total"
    assert moved(left_out, trial=str(reg.members[1].trial_id)) == 1
    assert moved(left_out, trial=str(reg.members[0].trial_id)) == 0
    assert after.value("baobab_predictor_queue_depth") == 0
    text = requests.get(metrics, timeout=5).text
    assert reg.api_key not in text and "not-the-key" not in text


def test_queue_depth_counts_the_queries_waiting_behind_a_slow_batch(reg: Served) -> None:
    slow = reg.rows[:1].tolist()
    slow[0][0] = 888  # the third member sleeps: this batch lasts the member timeout
    answers: list[int] = []
    before = reg.batches_logged()
    first = threading.Thread(target=lambda: answers.append(reg.post({"queries": slow}).status_code))
    first.start()
    # its batch is taken (the best member got it) and waits for the sleeper
    wait_until(lambda: reg.batches_logged() > before, what="the slow batch to be taken")
    second = threading.Thread(target=lambda: answers.append(reg.post({"queries": reg.rows[:5].tolist()}).status_code))
    second.start()
    wait_until(
        lambda: scrape(f"{reg.url}/metrics").value("baobab_predictor_queue_depth") == 5,
        timeout=TIMEOUT_S,
        what="the second request's 5 queries waiting",
    )
    first.join()
    second.join()
    assert answers == [200, 200]
    assert scrape(f"{reg.url}/metrics").value("baobab_predictor_queue_depth") == 0


def _too_large(status: int, body: dict[str, Any]) -> None:
    assert status == 413, body
    assert body["error"] == {
        "code": "request_entity_too_large",
        "message": f"the request body is larger than the limit of {LIMIT_MB} MiB (BAOBAB_MAX_PREDICT_MB); "
        "send fewer queries",
        "field": None,
    }


def test_a_body_over_the_limit_is_refused_from_its_content_length_before_it_is_sent(reg: Served) -> None:
    # Only the headers go out: the answer cannot have waited for a body (50 MB took a predictor to 600 MB).
    headers = {"Content-Type": "application/json", "Content-Length": str(50 * 2**20)}
    _too_large(*post_raw(f"{reg.url}/predict", {**headers, "Authorization": f"Bearer {reg.api_key}"}, ()))
    _too_large(
        *post_raw(f"{reg.url}/predict", {**headers, "Content-Length": str(LIMIT_MB * 2**20 + 1)}, ())
    )  # no key either
    assert reg.post({"queries": reg.rows[:2].tolist()}).status_code == 200  # and it serves on


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(reg: Served) -> None:
    chunk = b" " * 2**16
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    count = LIMIT_MB * 2**20 // len(framed) + 1  # just past the limit; the body never ends (no last chunk)
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    _too_large(*post_raw(f"{reg.url}/predict", {**headers, "Authorization": f"Bearer {reg.api_key}"}, [framed] * count))


def test_a_body_of_the_limit_is_served(reg: Served) -> None:
    queries = reg.rows[:2].tolist()
    body = json.dumps({"queries": queries}).encode()
    padded = body + b" " * (LIMIT_MB * 2**20 - len(body))
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {reg.api_key}"}
    # Sent whole (Content-Length), then chunked (a generator body; the limit counts its chunk framing too).
    for data in (padded, iter([padded[: 2**19], padded[2**19 : -64]])):
        answer = requests.post(f"{reg.url}/predict", data=data, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(answer.json()["predictions"], expected_mean(reg, queries), rtol=1e-9)
