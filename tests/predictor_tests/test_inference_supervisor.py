"""The inference supervisor with real predictor processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import requests
from predictor_world import SK_IMAGES, START_TIMEOUT_S, TINY, World, children, pid_alive, run_in_thread

from baobab.model import DatasetFormat, Task
from baobab.predictor import InferenceSupervisor, PredictorOptions
from baobab.store import (
    Event,
    EventKind,
    InferenceJob,
    InferenceJobStatus,
    LocalEventChannel,
    session_scope,
    write_image_files,
)
from baobab.testing import wait_until

Start = Callable[..., tuple[InferenceSupervisor, LocalEventChannel, Callable[[], None]]]


@pytest.fixture
def start(world: World) -> Iterator[Start]:
    """Runs supervisors in threads; each is stopped at the end of the test if the test did not."""
    stops: list[Callable[[], None]] = []

    def start(**kwargs: object) -> tuple[InferenceSupervisor, LocalEventChannel, Callable[[], None]]:
        events = LocalEventChannel()
        supervisor = InferenceSupervisor(world.engine, events, world.settings, **kwargs)
        halt = run_in_thread(supervisor)
        stops.append(halt)
        return supervisor, events, halt

    yield start
    for halt in stops:
        halt()


def regression_job(world: World, **kwargs: object) -> tuple[int, str]:
    dataset_id, diabetes = world.tabular("diabetes")
    sub_job = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor")
    store_params = bool(kwargs.pop("store_params", True))
    trial = world.trial(sub_job, TINY, "TinyRegressor", {"offset": 1.0}, diabetes, score=0.5, store_params=store_params)
    return world.inference_job([trial.trial_id], **kwargs)


def wait_status(world: World, job_id: int, status: InferenceJobStatus, *, old_url: str | None = None) -> InferenceJob:
    """Wait for ``status``; RUNNING also needs a URL other than ``old_url``."""

    def reached() -> InferenceJob | None:
        job = world.job(job_id)
        if job.status is not status:
            return None
        if status is InferenceJobStatus.RUNNING and job.predictor_url in (None, old_url):
            return None
        return job

    return wait_until(reached, timeout=START_TIMEOUT_S, what=f"inference job {job_id} to be {status}", interval=0.1)


def counting(supervisor: InferenceSupervisor, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[None]]:
    """The jobs of the INFERENCE_CREATED events ``supervisor`` handles from now on, and a mark per reconciling
    round it ends: what a test waits on to give the supervisor the chance to do what it must not."""
    handled: list[int] = []
    rounds: list[None] = []
    start_if_wanted, reconcile = supervisor._start_if_wanted, supervisor._reconcile

    def handle(job_id: int) -> None:
        start_if_wanted(job_id)
        handled.append(job_id)

    def reconciled() -> None:
        reconcile()
        rounds.append(None)

    monkeypatch.setattr(supervisor, "_start_if_wanted", handle)
    monkeypatch.setattr(supervisor, "_reconcile", reconciled)
    return handled, rounds


def test_created_jobs_are_served_and_stopped_jobs_killed(world: World, start: Start) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images[:400] * 15).astype(np.uint8)
    dataset_id, path = world.dataset(
        write_image_files(world.work / "digits.zip", images, digits.target[:400]), DatasetFormat.IMAGE_FILES
    )
    sub_job = world.train_job(Task.IMAGE_CLASSIFICATION, dataset_id, SK_IMAGES, "SkImageClassifier")
    members = [
        world.trial(sub_job, SK_IMAGES, "SkImageClassifier", knobs, path, score=score)
        for knobs, score in (
            ({"components": 16, "neighbors": 7, "weights": "uniform"}, 0.8),
            ({"components": 16, "neighbors": 3, "weights": "distance"}, 0.9),
        )
    ]
    image_job, api_key = world.inference_job([m.trial_id for m in members])
    supervisor, events, halt = start()
    events.publish(Event(EventKind.INFERENCE_CREATED, image_job))
    job = wait_status(world, image_job, InferenceJobStatus.RUNNING)
    assert job.predictor_url is not None and job.error is None

    # Probabilities of the two k-NN members are averaged; the better member is listed first.
    queries = (digits.images[400:410] * 15).astype(int).tolist()
    headers = {"Authorization": f"Bearer {api_key}"}
    response = requests.post(f"{job.predictor_url}/predict", json={"queries": queries}, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    expected = np.mean([m.model.predict(queries) for m in members], axis=0)
    np.testing.assert_allclose(body["predictions"], expected, rtol=1e-6)
    assert body["members"]["answered"] == [members[1].trial_id, members[0].trial_id]
    # An image of another size than the training images is the client's error.
    response = requests.post(
        f"{job.predictor_url}/predict", json={"queries": [queries[0], [[0] * 7] * 8]}, headers=headers, timeout=30
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "queries[1]"
    assert "expected 8 x 8 (H x W, grayscale)" in response.json()["error"]["message"]

    # A predictor that dies while serving errors its job.
    pid = supervisor.predictor_pid(image_job)
    assert pid is not None
    workers = children(pid)
    assert len(workers) == 2
    os.killpg(pid, signal.SIGKILL)
    job = wait_status(world, image_job, InferenceJobStatus.ERRORED)
    # Its inference workers (in process groups of their own) notice and exit.
    wait_until(lambda: not any(pid_alive(w) for w in workers), what="the orphaned inference workers to exit")
    assert job.error.startswith("the predictor was killed by signal SIGKILL while serving")
    assert job.predictor_url is None
    assert supervisor.predictor_pid(image_job) is None

    # A stopped job's predictor is killed; the job stays STOPPED.
    other_job, _ = regression_job(world)
    events.publish(Event(EventKind.INFERENCE_CREATED, other_job))
    url = wait_status(world, other_job, InferenceJobStatus.RUNNING).predictor_url
    pid = supervisor.predictor_pid(other_job)
    assert pid is not None
    workers = children(pid)
    assert len(workers) == 1
    with session_scope(world.engine) as session:  # what the admin API does
        stopped = session.get(InferenceJob, other_job)
        stopped.status, stopped.stopped_at = InferenceJobStatus.STOPPED, datetime.now(UTC)
    events.publish(Event(EventKind.INFERENCE_STOPPED, other_job))
    wait_until(lambda: not pid_alive(pid) and not pid_alive(workers[0]), what="the stopped predictor to be gone")
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/health", timeout=5)
    halt()
    assert world.job(other_job).status is InferenceJobStatus.STOPPED


def test_jobs_are_restarted_from_the_store(world: World, start: Start) -> None:
    stale = "http://127.0.0.1:9"
    running, api_key = regression_job(world, status=InferenceJobStatus.RUNNING, predictor_url=stale)
    starting, _ = regression_job(world, public=True)  # its INFERENCE_CREATED was lost
    stopped, _ = regression_job(world, status=InferenceJobStatus.STOPPED)

    supervisor, _, halt = start()
    first = {
        job_id: wait_status(world, job_id, InferenceJobStatus.RUNNING, old_url=stale) for job_id in (running, starting)
    }
    headers = {"Authorization": f"Bearer {api_key}"}
    response = requests.post(
        f"{first[running].predictor_url}/predict", json={"queries": [[0.0] * 10]}, headers=headers, timeout=30
    )
    assert response.status_code == 200
    assert supervisor.predictor_pid(stopped) is None
    pids = [supervisor.predictor_pid(job_id) for job_id in (running, starting)]

    # Stopping the supervisor kills its predictors but leaves the jobs to the next one.
    halt()
    for pid in pids:
        assert pid is not None and not pid_alive(pid)
    assert world.job(running).status is InferenceJobStatus.RUNNING

    start()
    for job_id in (running, starting):
        job = wait_status(world, job_id, InferenceJobStatus.RUNNING, old_url=first[job_id].predictor_url)
        assert requests.get(f"{job.predictor_url}/health", timeout=5).json()["members"] == 1
    assert world.job(stopped).status is InferenceJobStatus.STOPPED


def test_a_predictor_that_cannot_serve_errors_its_job(world: World, start: Start) -> None:
    broken, _ = regression_job(world, store_params=False)
    _, events, halt = start()
    events.publish(Event(EventKind.INFERENCE_CREATED, broken))
    job = wait_status(world, broken, InferenceJobStatus.ERRORED)
    assert job.error.startswith("the predictor exited with status 1 before serving")
    assert "no member could be loaded" in job.error and "has no stored parameters" in job.error
    halt()

    slow, _ = regression_job(world)
    _, events, _ = start(start_timeout_s=0.2)
    events.publish(Event(EventKind.INFERENCE_CREATED, slow))
    job = wait_status(world, slow, InferenceJobStatus.ERRORED)
    assert job.error.startswith("the predictor did not serve within 0.2 s and was killed")


def test_options_reach_the_predictor() -> None:
    options = PredictorOptions(batch_window_s=0.002, max_batch_size=8, member_timeout_s=1.5)
    assert options.to_args()[:3] == ["--batch-window-ms=2", "--max-batch-size=8", "--member-timeout-s=1.5"]


def test_a_one_job_supervisor_serves_that_job_on_its_port_under_the_advertised_name(
    world: World, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``baobab predictor --job`` runs in a container: the other jobs are left to their own supervisors."""
    mine, api_key = regression_job(world)
    other, _ = regression_job(world, status=InferenceJobStatus.RUNNING, predictor_url="http://elsewhere:9")
    with socket.socket() as probe:  # a port free now, as a container's fixed port would be
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    supervisor, events, halt = start(host="0.0.0.0", job_ids=[mine], port=port, advertise="localhost", reconcile_s=0.2)
    job = wait_status(world, mine, InferenceJobStatus.RUNNING)
    assert job.predictor_url == f"http://localhost:{port}"
    response = requests.post(
        f"{job.predictor_url}/predict",
        json={"queries": [[0.0] * 10]},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    handled, rounds = counting(supervisor, monkeypatch)
    events.publish(Event(EventKind.INFERENCE_CREATED, other))
    third, _ = regression_job(world)
    events.publish(Event(EventKind.INFERENCE_CREATED, third))
    # That it leaves both alone shows only once it has had the chance: the events handled, then two whole
    # rounds of reconciling (counted, not timed: the supervisor's thread does one thing at a time).
    wait_until(lambda: {other, third} <= set(handled), what="the supervisor to handle both events")
    after = len(rounds)
    wait_until(lambda: len(rounds) >= after + 2, what="two more rounds of reconciling")
    halt()
    assert supervisor.predictor_pid(other) is None and supervisor.predictor_pid(third) is None
    assert world.job(other).predictor_url == "http://elsewhere:9"  # not taken over: not this supervisor's job
    assert world.job(third).status is InferenceJobStatus.STARTING


def test_a_fixed_port_is_for_one_job_only(world: World) -> None:
    with pytest.raises(ValueError, match="a fixed predictor port serves one inference job"):
        InferenceSupervisor(world.engine, LocalEventChannel(), world.settings, port=8200)
    with pytest.raises(ValueError, match="give exactly one job id"):
        InferenceSupervisor(world.engine, LocalEventChannel(), world.settings, job_ids=[1, 2], port=8200)


def test_several_hosts_share_the_jobs_by_leases(world: World, start: Start) -> None:
    """Predictor hosts as ``baobab predictor`` runs them on several machines of a cluster."""
    stale = "http://127.0.0.1:9"
    now = datetime.now(UTC)
    running = {"status": InferenceJobStatus.RUNNING, "predictor_url": stale}
    held, _ = regression_job(world, **running, driver="alive:1:a", lease_expires_at=now + timedelta(hours=1))
    orphaned, _ = regression_job(world, **running, driver="dead:1:b", lease_expires_at=now - timedelta(seconds=1))
    fresh = [regression_job(world)[0] for _ in range(2)]
    first, _, halt_first = start(reconcile_s=0.2)
    second, _, _ = start(reconcile_s=0.2)

    served = {
        job_id: wait_status(world, job_id, InferenceJobStatus.RUNNING, old_url=stale) for job_id in [orphaned, *fresh]
    }
    for job_id in served:  # each job by one host, the one named in its lease
        pids = [s.predictor_pid(job_id) for s in (first, second)]
        assert sum(pid is not None for pid in pids) == 1, (job_id, pids)
        owner = first if pids[0] is not None else second
        assert world.job(job_id).driver == owner.name
    # a lease that holds is left alone, even on a job whose URL looks dead
    assert world.job(held).predictor_url == stale and world.job(held).driver == "alive:1:a"
    assert first.predictor_pid(held) is None and second.predictor_pid(held) is None

    # a host that stops cleanly hands its jobs over at once
    moved = [job_id for job_id in served if first.predictor_pid(job_id) is not None]
    halt_first()
    for job_id in moved:
        job = wait_status(world, job_id, InferenceJobStatus.RUNNING, old_url=served[job_id].predictor_url)
        assert job.driver == second.name and second.predictor_pid(job_id) is not None
