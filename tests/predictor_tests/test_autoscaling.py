"""Embedded autoscaling in a real predictor: worker replicas follow the load, and no request is lost.

The predictor is started by a real supervisor with the settings ``predictor_min_replicas`` and
``predictor_max_replicas`` and short scaling windows. Its one member takes 0.1 s a batch
(TinyRegressor's ``batch_delay_s``), so clients that keep asking hold a load above one replica's
target; when they stop, the second replica goes again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from predictor_world import TINY, World, children, make_world, pid_alive, supervise, tabular_frame
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from baobab.model import Task
from baobab.store import InferenceJob, InferenceJobStatus, LocalEventChannel, Trial, session_scope
from baobab.testing import wait_until

SCALING = {"scale_target": 2.0, "scale_up_after_s": 0.5, "scale_down_after_s": 1.5}


def served_job(world: World) -> tuple[int, Any, np.ndarray]:
    """An inference job of one slow TinyRegressor trial; its id, its trained model and some query rows."""
    dataset_id, diabetes = world.tabular("diabetes")
    sub_job = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor")
    trial = world.trial(sub_job, TINY, "TinyRegressor", {"offset": 3.0, "batch_delay_s": 0.1}, diabetes, score=0.5)
    job_id, _ = world.inference_job([trial.trial_id], public=True)
    return job_id, trial.model, tabular_frame("diabetes").drop(columns="target").to_numpy()


def predictor_url(world: World, job_id: int) -> str:
    def url() -> str | None:
        with session_scope(world.engine) as session:
            job = session.get(InferenceJob, job_id)
            assert job is not None
            return job.predictor_url if job.status is InferenceJobStatus.RUNNING else None

    return wait_until(url, timeout=120, what="the predictor to serve")


def health(url: str) -> dict[str, Any]:
    return requests.get(f"{url}/health", timeout=5).json()


def replicas_metric(url: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=5).text
    return next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "baobab_predictor_replicas"
    )


def workers(world: World, job_id: int, supervisor: Any) -> list[int]:
    pid = supervisor.predictor_pid(job_id)
    assert pid is not None
    return children(pid)


def test_replicas_follow_the_load_up_and_down_without_a_failed_request(tmp_path: Path) -> None:
    world = make_world(f"sqlite:///{tmp_path / 'baobab.db'}", tmp_path / "home", predictor_max_replicas=2)
    job_id, model, rows = served_job(world)
    supervisor, halt = supervise(world, LocalEventChannel(), {job_id}, **SCALING)
    try:
        url = predictor_url(world, job_id)
        assert health(url)["versions"][0]["replicas"] == 1
        first = workers(world, job_id, supervisor)
        assert len(first) == 1

        answers: list[tuple[int, int, Any]] = []  # (row, status, body)
        stop = threading.Event()

        def client(i: int) -> None:
            n = 0
            while not stop.is_set():
                row = (i * 37 + n) % len(rows)
                response = requests.post(f"{url}/predict", json={"queries": [rows[row].tolist()]}, timeout=30)
                answers.append((row, response.status_code, response.json()))
                n += 1

        clients = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(8)]
        for thread in clients:
            thread.start()
        try:
            wait_until(lambda: health(url)["versions"][0]["replicas"] == 2, timeout=60, what="a second replica")
            assert replicas_metric(url) == 2
            scaled = workers(world, job_id, supervisor)
            assert len(scaled) == 2 and set(first) < set(scaled)  # the first replica's worker kept serving
            served_before = len(answers)
            wait_until(lambda: len(answers) > served_before + 16, timeout=30, what="answers from two replicas")
        finally:
            stop.set()
            for thread in clients:
                thread.join(30)

        assert answers and all(status == 200 for _, status, _ in answers), {s for _, s, _ in answers}
        rows_asked = [row for row, _, _ in answers]
        np.testing.assert_allclose(
            [body["predictions"][0] for _, _, body in answers], model.predict(rows[rows_asked].tolist()), rtol=1e-9
        )
        # idle now: the newest replica goes, its worker with it; the first stays (on a busy machine a
        # replica may have gone and come back while the clients ran: wait for the last one to go too)
        added = (set(scaled) - set(first)).pop()
        wait_until(lambda: not pid_alive(added), timeout=30, what="the second replica's worker to exit")
        wait_until(lambda: workers(world, job_id, supervisor) == first, timeout=30, what="the first worker alone")
        assert health(url)["versions"][0]["replicas"] == 1
        response = requests.post(f"{url}/predict", json={"queries": [rows[0].tolist()]}, timeout=30)
        assert response.status_code == 200, response.text
    finally:
        halt()
        world.engine.dispose()


def test_each_member_set_starts_with_the_minimum_of_replicas(tmp_path: Path) -> None:
    world = make_world(
        f"sqlite:///{tmp_path / 'baobab.db'}", tmp_path / "home", predictor_min_replicas=2, predictor_max_replicas=3
    )
    job_id, model, rows = served_job(world)
    supervisor, halt = supervise(world, LocalEventChannel(), {job_id}, **SCALING)
    try:
        url = predictor_url(world, job_id)
        assert health(url)["versions"][0]["replicas"] == 2
        assert len(workers(world, job_id, supervisor)) == 2
        # idle, but never below the minimum
        threading.Event().wait(SCALING["scale_down_after_s"] * 2)
        assert health(url)["versions"][0]["replicas"] == 2
        response = requests.post(f"{url}/predict", json={"queries": [rows[5].tolist()]}, timeout=30)
        # JSON round trip and the worker's own batch may change the last bit of a float
        assert response.json()["predictions"] == pytest.approx(model.predict([rows[5].tolist()]), rel=1e-12)
    finally:
        halt()
        world.engine.dispose()


def test_a_replica_that_cannot_load_is_not_retried_at_once_and_the_first_serves_on(tmp_path: Path) -> None:
    world = make_world(f"sqlite:///{tmp_path / 'baobab.db'}", tmp_path / "home", predictor_max_replicas=2)
    job_id, model, rows = served_job(world)
    supervisor, halt = supervise(world, LocalEventChannel(), {job_id}, **{**SCALING, "scale_down_after_s": 60.0})
    try:
        url = predictor_url(world, job_id)
        with session_scope(world.engine) as session:  # the parameters go: a new replica cannot load them
            (params,) = session.scalars(select(Trial.params_path).where(Trial.params_path.is_not(None)))
        world.store.delete(params)
        log = world.settings.home / "logs" / f"predictor-{job_id}.log"
        failures = "a new replica could not be loaded"
        statuses: list[int] = []
        stop = threading.Event()

        def client() -> None:
            while not stop.is_set():
                response = requests.post(f"{url}/predict", json={"queries": [rows[1].tolist()]}, timeout=30)
                statuses.append(response.status_code)

        clients = [threading.Thread(target=client, daemon=True) for _ in range(8)]
        for thread in clients:
            thread.start()
        try:
            wait_until(lambda: failures in log.read_text(), timeout=60, what="the failed replica in the log")
            threading.Event().wait(4 * SCALING["scale_up_after_s"])  # room for several tries, were there no pause
        finally:
            stop.set()
            for thread in clients:
                thread.join(30)
        assert log.read_text().count(failures) == 1
        assert health(url)["versions"][0]["replicas"] == 1
        assert statuses and set(statuses) == {200}
        assert len(workers(world, job_id, supervisor)) == 1
    finally:
        halt()
        world.engine.dispose()
