"""A real predictor following its job's versions: rollouts without a failed request, routing by weight,
promote and rollback, in-flight requests kept, a version that cannot load, over real HTTP.

The versions are changed in the store by the repository functions the admin API calls (its routes are
tested in ``tests/admin_tests/test_inference_versions.py``). One predictor serves the module: a
TABULAR_REGRESSION job on scikit-learn's diabetes set whose TinyRegressor trials differ by their
offsets, so each version's answers are known: the mean of its members'.
"""

from __future__ import annotations

import collections
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from predictor_world import TINY, Predictor, Trained, World, children, make_world, pid_alive, tabular_frame

from baobab.model import Task
from baobab.store import (
    InferenceJob,
    Trial,
    VersionSpec,
    inference_revision,
    promote_inference_version,
    record_served_revision,
    rollback_inference_revision,
    session_scope,
    set_inference_versions,
)
from baobab.testing import wait_until

POLL_S = 0.2
SLOW = 777  # a first value that makes the "slow" member take PAUSE_S (2 s) to answer


@dataclass
class Served:
    world: World
    job_id: int
    url: str
    predictor: Predictor
    trials: dict[str, Trained]
    rows: np.ndarray
    broken: int  # a trial whose parameters are gone: it cannot load
    slow_log: Path  # the "slow" member appends the size of each batch it is given here

    def ask(self, queries: list[list[float]]) -> requests.Response:
        return requests.post(f"{self.url}/predict", json={"queries": queries}, timeout=30)

    def expected(self, names: tuple[str, ...], queries: list[list[float]]) -> np.ndarray:
        return np.mean([self.trials[name].model.predict(queries) for name in names], axis=0)

    def ids(self, *names: str) -> tuple[int, ...]:
        return tuple(self.trials[name].trial_id for name in names)

    def change(self, how: Any) -> int:
        """Apply ``how(session)`` as the admin API does; the new wanted revision."""
        with session_scope(self.world.engine) as session:
            return how(session).number

    def rollout(self, *versions: tuple[str, float, tuple[str, ...]]) -> int:
        specs = [VersionSpec(name, weight, self.ids(*members)) for name, weight, members in versions]
        now = datetime.now(UTC)
        return self.change(lambda session: set_inference_versions(session, self.job_id, specs, now=now))

    def health(self) -> dict[str, Any]:
        return requests.get(f"{self.url}/health", timeout=5).json()

    def wait_serving(self, revision: int) -> dict[str, Any]:
        return wait_until(
            lambda: (h := self.health())["revision"] == revision and h["members"] == h["ready"] and h,
            timeout=60,
            what=f"the predictor to serve revision {revision}",
        )

    def workers(self) -> set[int]:
        return set(children(self.predictor.process.pid))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, signal_root: Path) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("predictor-versions")
    world = make_world(f"sqlite:///{home / 'baobab.db'}", home)
    slow_log = Path(tempfile.mkdtemp(dir=signal_root)) / "batches.txt"  # where a confined member can write
    slow_log.touch()
    dataset_id, diabetes = world.tabular("diabetes")
    first = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor", app="shop")
    second = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor", app="shop", version=2)
    trials = {
        "a": world.trial(first, TINY, "TinyRegressor", {"offset": 0.0}, diabetes, score=0.6),
        "b": world.trial(first, TINY, "TinyRegressor", {"offset": 10.0}, diabetes, score=0.5),
        "slow": world.trial(
            first,
            TINY,
            "TinyRegressor",
            {"offset": 30.0, "pause_on": SLOW, "batch_log": str(slow_log)},
            diabetes,
            score=0.4,
        ),
        "c": world.trial(second, TINY, "TinyRegressor", {"offset": 100.0}, diabetes, score=0.3),  # app version 2
    }
    broken = world.trial(second, TINY, "TinyRegressor", {"offset": 1.0}, diabetes, score=0.2, store_params=False)
    with session_scope(world.engine) as session:  # names parameters that are not there
        row = session.get(Trial, broken.trial_id)
        assert row is not None
        row.params_path = "params/gone.safetensors"
    job_id, _ = world.inference_job([trials["a"].trial_id], public=True)
    predictor = Predictor(world, job_id, f"--versions-poll-s={POLL_S}")
    try:
        url = predictor.wait_url()
        frame = tabular_frame("diabetes")
        rows = frame.drop(columns="target").to_numpy()
        yield Served(world, job_id, url, predictor, trials, rows, broken.trial_id, slow_log)
    finally:
        predictor.close()
        world.engine.dispose()


def test_a_rollout_fails_no_request_and_rollback_restores_the_old_answers(served: Served) -> None:
    s = served
    queries = s.rows[[3, 14, 15]].tolist()
    revision = s.rollout(("v1", 1.0, ("a",)))
    s.wait_serving(revision)
    before = s.ask(queries)
    assert before.status_code == 200, before.text
    assert before.json()["version"] == "v1"
    np.testing.assert_allclose(before.json()["predictions"], s.expected(("a",), queries), rtol=1e-9)

    # A client loops on /predict through a canary, a promotion and two rollbacks.
    answers: list[tuple[int, Any]] = []  # (status, body): a kept response would keep its connection open
    done = threading.Event()

    def client() -> None:
        with requests.Session() as session:
            while not done.is_set():
                response = session.post(f"{s.url}/predict", json={"queries": queries}, timeout=30)
                answers.append((response.status_code, response.json()))

    def latest(count: int = 1) -> set[str]:
        return {body.get("version") for _, body in answers[-count:]}

    thread = threading.Thread(target=client)
    thread.start()
    try:
        canary = s.rollout(("v1", 1.0, ("a",)), ("v2", 1.0, ("b", "c")))
        s.wait_serving(canary)
        wait_until(lambda: "v2" in latest(20), what="answers from v2")
        promoted = s.change(lambda session: promote_inference_version(session, s.job_id, "v2", now=datetime.now(UTC)))
        s.wait_serving(promoted)
        wait_until(lambda: latest() == {"v2"}, what="answers after the promotion")
        for _ in range(2):  # back to the canary, then to v1 alone
            back = s.change(lambda session: rollback_inference_revision(session, s.job_id, now=datetime.now(UTC)))
            s.wait_serving(back)
        count = len(answers)
        wait_until(lambda: len(answers) > count + 5, what="answers after the rollbacks")
    finally:
        done.set()
        thread.join(30)

    assert [(status, body) for status, body in answers if status != 200] == []
    expected = {"v1": s.expected(("a",), queries), "v2": s.expected(("b", "c"), queries)}
    for _, body in answers:
        np.testing.assert_allclose(body["predictions"], expected[body["version"]], rtol=1e-9)
        assert body["members"]["answered"] == list(s.ids("a") if body["version"] == "v1" else s.ids("b", "c"))
    assert {body["version"] for _, body in answers} == {"v1", "v2"}
    # Rolled back: the same queries get the old version's answers again.
    after = s.ask(queries).json()
    assert after["version"] == "v1"
    np.testing.assert_allclose(after["predictions"], before.json()["predictions"], rtol=1e-12)
    assert s.health()["versions"] == [
        {"name": "v1", "weight": 1.0, "members": list(s.ids("a")), "ready": 1, "replicas": 1}
    ]
    # The workers of v2 were closed; the predictor wrote what it serves.
    wait_until(lambda: len(s.workers()) == 1, what="v2's workers to end")
    with session_scope(s.world.engine) as session:
        job = session.get(InferenceJob, s.job_id)
        assert job is not None and job.served_revision == job.revision == back


CLIENTS = 8


def test_a_rollout_under_load_from_8_clients_fails_no_request(served: Served) -> None:
    """8 clients send queries without pause while the job rolls to a version on new workers: every request is
    answered 200 by the old or the new version, and each one sent after the switch by the new."""
    s = served
    first = s.rollout(("v1", 1.0, ("a",)))
    s.wait_serving(first)
    queries = [s.rows[[i, i + 8]].tolist() for i in range(CLIENTS)]  # each client its own two rows
    switched = threading.Event()  # set once the predictor says it serves the new revision
    done = threading.Event()
    # Per client: (sent after the switch was seen, status or the exception's name, body).
    answers: list[list[tuple[bool, int | str, Any]]] = [[] for _ in range(CLIENTS)]

    def client(number: int) -> None:
        with requests.Session() as session:
            while not done.is_set():
                after = switched.is_set()
                try:
                    response = session.post(f"{s.url}/predict", json={"queries": queries[number]}, timeout=60)
                except requests.RequestException as e:  # a refused or dropped connection is a failed request too
                    answers[number].append((after, type(e).__name__, None))
                    continue
                answers[number].append((after, response.status_code, response.json()))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: all(len(a) >= 3 for a in answers), what="every client to be answered by v1")
        second = s.rollout(("v2", 1.0, ("b", "c")))  # new members: their workers start while the load goes on
        s.wait_serving(second)
        switched.set()
        wait_until(
            lambda: all(sum(after for after, _, _ in a) >= 3 for a in answers),
            what="every client to be answered after the switch",
        )
    finally:
        done.set()
        for thread in threads:
            thread.join(60)

    failed = [(n, status, body) for n, a in enumerate(answers) for _, status, body in a if status != 200]
    assert failed == []
    for number, client_answers in enumerate(answers):
        for after, _, body in client_answers:
            names = ("a",) if body["version"] == "v1" else ("b", "c")
            np.testing.assert_allclose(body["predictions"], s.expected(names, queries[number]), rtol=1e-9)
            if after:  # sent once the new revision was served: only the new version answers
                assert body["version"] == "v2", body
    versions = collections.Counter(body["version"] for a in answers for _, _, body in a)
    assert set(versions) == {"v1", "v2"}, versions
    # The old version's workers end once its last request is answered.
    wait_until(lambda: len(s.workers()) == 2, what="v1's worker to end")


def test_requests_are_routed_by_weight_and_a_weight_change_keeps_the_workers(served: Served) -> None:
    s = served
    revision = s.rollout(("v1", 3.0, ("a",)), ("v2", 1.0, ("b",)), ("dark", 0.0, ("c",)))
    s.wait_serving(revision)
    # The version of weight 0 is loaded too, ready for traffic; the last test's workers end on their own time.
    workers = wait_until(lambda: len(w := s.workers()) == 3 and w, what="a worker for each of the three versions")
    query = s.rows[:1].tolist()
    counts = collections.Counter(s.ask(query).json()["version"] for _ in range(400))
    # v2 gets a quarter: 100 expected, a standard deviation of 8.7; the bound is loose on purpose.
    assert counts["dark"] == 0 and counts["v1"] + counts["v2"] == 400
    assert 60 <= counts["v2"] <= 140, counts

    # Only weights and a name change: the same workers serve, none is started or stopped.
    revision = s.rollout(("v1", 1.0, ("a",)), ("canary", 3.0, ("b",)), ("dark", 0.0, ("c",)))
    s.wait_serving(revision)
    assert s.workers() == workers
    counts = collections.Counter(s.ask(query).json()["version"] for _ in range(200))
    assert set(counts) == {"v1", "canary"} and counts["canary"] > counts["v1"], counts


def test_a_request_in_flight_is_answered_by_its_version_before_the_version_closes(served: Served) -> None:
    s = served
    # "slow" serves everything; "a" is loaded beside it without traffic, so the switch needs no load.
    staged = s.rollout(("old", 1.0, ("slow",)), ("new", 0.0, ("a",)))
    s.wait_serving(staged)
    staged_workers = wait_until(lambda: len(w := s.workers()) == 2 and w, what="the workers of earlier versions to end")
    query = s.rows[:1].tolist()
    query[0][0] = SLOW
    answer: list[requests.Response] = []
    batches = len(s.slow_log.read_text().splitlines())
    thread = threading.Thread(target=lambda: answer.append(s.ask(query)))
    thread.start()
    wait_until(lambda: len(s.slow_log.read_text().splitlines()) > batches, what="the slow request to reach its member")
    switched = s.rollout(("new", 1.0, ("a",)))
    s.wait_serving(switched)
    assert thread.is_alive(), "the slow request should still be in flight after the switch"
    assert len(s.workers()) == 2  # the old version's worker waits for its request
    assert s.ask(s.rows[:1].tolist()).json()["version"] == "new"
    thread.join(30)
    assert answer[0].status_code == 200, answer[0].text
    assert answer[0].json()["version"] == "old"
    np.testing.assert_allclose(answer[0].json()["predictions"], s.expected(("slow",), query), rtol=1e-9)
    wait_until(lambda: len(s.workers()) == 1, what="the old version's worker to end")
    (kept,) = s.workers()
    (closed,) = staged_workers - {kept}  # "a" kept the worker it was staged with
    assert not pid_alive(closed)


def test_a_version_that_cannot_load_leaves_the_running_ones_serving(served: Served) -> None:
    s = served
    running = s.rollout(("v1", 1.0, ("a",)))
    s.wait_serving(running)
    with session_scope(s.world.engine) as session:
        failed = set_inference_versions(
            session, s.job_id, [VersionSpec("v1", 1.0, s.ids("a")), VersionSpec("bad", 1.0, (s.broken,))],
            now=datetime.now(UTC),
        ).number  # fmt: skip

    def error() -> str | None:
        with session_scope(s.world.engine) as session:
            row = inference_revision(session, s.job_id, failed)
            assert row is not None
            return row.error

    message = wait_until(error, timeout=60, what="the failed revision's reason")
    assert message.startswith(f"no member could be loaded: trial {s.broken}: ")
    assert s.health()["revision"] == running
    queries = s.rows[:2].tolist()
    for _ in range(10):
        body = s.ask(queries).json()
        assert body["version"] == "v1"
    with session_scope(s.world.engine) as session:
        job = session.get(InferenceJob, s.job_id)
        assert job is not None and (job.revision, job.served_revision) == (failed, running)
    # Rolling back is a new revision with what was served: nothing to load, served at once.
    back = s.change(lambda session: rollback_inference_revision(session, s.job_id, now=datetime.now(UTC)))
    s.wait_serving(back)


def test_a_predictor_that_starts_on_a_revision_that_cannot_load_serves_the_one_served_before(
    served: Served,
) -> None:
    s, world = served, served.world
    job_id, _ = world.inference_job([s.trials["b"].trial_id], public=True)
    with session_scope(world.engine) as session:
        assert record_served_revision(session, job_id, 1)  # a predictor served revision 1 before
        wanted = set_inference_versions(
            session, job_id, [VersionSpec("bad", 1.0, (s.broken,))], now=datetime.now(UTC)
        ).number
    predictor = Predictor(world, job_id, f"--versions-poll-s={POLL_S}")
    try:
        url = predictor.wait_url()
        body = requests.post(f"{url}/predict", json={"queries": s.rows[:1].tolist()}, timeout=30).json()
        assert body["version"] == "v1" and body["members"]["answered"] == [s.trials["b"].trial_id]
        with session_scope(world.engine) as session:
            row = inference_revision(session, job_id, wanted)
            assert row is not None and (row.error or "").startswith("no member could be loaded")
            job = session.get(InferenceJob, job_id)
            assert job is not None and job.served_revision == 1
    finally:
        predictor.close()
