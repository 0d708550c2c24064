"""run_trial in this process: claim, train, store, on SQLite and PostgreSQL.

The trial reports to a real admin API with its token, and reads its inputs through it,
as a local worker does. The local executor's worker processes call the same function;
their tests (test_local_executor.py) cover what only processes can show.
"""

from __future__ import annotations

import re
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import update
from worker_world import Platform

from baobab.model import TrialContext
from baobab.store import (
    ArtifactStore,
    Trial,
    TrialState,
    issue_trial_token,
    params_from_bytes,
    params_key,
    session_scope,
)
from baobab.testing import wait_until
from baobab.worker import ApiGateway, TrialOutcome, WorkerResources, run_trial, trial_seed


@pytest.fixture
def resources(tmp_path: Path) -> WorkerResources:
    return WorkerResources(cache_dir=tmp_path / "worker-cache", name="test-worker")


def _gateway(
    platform: Platform, trial_id: int, *, heartbeat_s: float | None = None, artifacts: ArtifactStore | None = None
) -> ApiGateway:
    """The admin API with the trial's token; its artifacts through the API unless a store is given."""
    token = issue_trial_token(platform.settings.signing_key(), trial_id)
    return ApiGateway(platform.api_url, trial_id, token, heartbeat_s=heartbeat_s, artifacts=artifacts)


def _run(platform: Platform, trial_id: int, resources: WorkerResources, **kwargs: Any) -> TrialOutcome:
    return run_trial(trial_id, resources, gateway=_gateway(platform, trial_id), **kwargs)


def test_a_good_trial_completes_with_score_params_metrics_and_logs(
    platform: Platform, resources: WorkerResources
) -> None:
    platform.add_trial("ok", 0.1)  # number 0
    trial_id = platform.add_trial("ok", 0.75)  # number 1

    outcome = _run(platform, trial_id, resources)

    assert outcome.ran and outcome.status is TrialState.COMPLETED and outcome.score == 0.75
    # the time of each phase, for the worker's metrics (none of fusion's measuring: not asked for)
    assert set(outcome.phases) == {"fetch", "build", "train", "evaluate", "store"}
    assert all(seconds > 0 for seconds in outcome.phases.values()), outcome.phases
    trial = platform.trial(trial_id)
    assert trial.status is TrialState.COMPLETED and trial.score == 0.75
    # Stored with the final state: each phase up to the parameters saved (the final state's own
    # request, which carried them, counts in the metrics only).
    assert trial.time_breakdown is not None and set(trial.time_breakdown) == set(outcome.phases)
    assert all(trial.time_breakdown[p] == outcome.phases[p] for p in ("fetch", "build", "train", "evaluate"))
    assert 0 < trial.time_breakdown["store"] < outcome.phases["store"]
    assert trial.worker == "test-worker" and trial.attempts == 1
    assert trial.started_at is not None and trial.finished_at is not None and trial.started_at <= trial.finished_at
    assert trial.error is None and trial.traceback is None
    assert trial.params_path == params_key(trial_id) == f"params/trial-{trial_id}.safetensors"
    params = params_from_bytes(platform.artifacts.get_bytes(trial.params_path))
    assert params["mode"] == "ok" and params["x"].tolist() == [0.75]
    # NaN is stored as null: JSON (and PostgreSQL) has no NaN.
    assert platform.metrics(trial_id) == [(1, {"loss": 0.5, "accuracy": None})]
    logs = platform.logs(trial_id)
    assert logs[1:] == ["progress 100%", "step one done"]  # a print, a progress bar on stderr, context.log
    # The seed comes from (sub-job seed, trial number); train() takes a `seed`, so it gets it,
    # and the global NumPy generator was seeded with it before the template was built.
    probe = platform.probe_line(trial_id)
    seed = trial_seed(1234, 1)
    assert int(probe["seed"]) == seed
    assert int(probe["draw"]) == np.random.RandomState(seed % 2**32).randint(2**31)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("raise", "train() raised ValueError: x=0.5 is a bad value"),
        ("memory", "train() raised MemoryError: cannot allocate 1 TB"),
        ("nan", "evaluate() returned nan; it must return a finite number, higher is better"),
    ],
)
def test_a_failing_template_ends_the_trial_errored(
    platform: Platform, resources: WorkerResources, mode: str, error: str
) -> None:
    trial_id = platform.add_trial(mode)

    outcome = _run(platform, trial_id, resources)

    assert outcome.status is TrialState.ERRORED and outcome.error == error
    reached = {"fetch", "build", "train", "store"} | ({"evaluate"} if mode == "nan" else set())
    assert set(outcome.phases) == reached
    trial = platform.trial(trial_id)
    assert trial.status is TrialState.ERRORED and trial.error == error
    assert trial.time_breakdown is not None and set(trial.time_breakdown) == reached - {"store"}
    assert trial.score is None and trial.params_path is None and trial.finished_at is not None
    assert not platform.artifacts.exists(params_key(trial_id))
    assert "step one done" in platform.logs(trial_id)  # what it logged before failing is kept
    if mode == "raise":
        # The template's traceback, from its own frame on: the file and line that raised.
        source = (Path(__file__).parent / "templates" / "probe.py").read_text().splitlines()
        line = source.index('            raise ValueError(f"x={x} is a bad value")') + 1
        assert trial.traceback.startswith("Traceback (most recent call last):\n")
        assert re.search(rf'File "[^"]+\.py", line {line}, in train\n', trial.traceback)
        assert "_trial_process.py" not in trial.traceback
        assert trial.traceback.endswith("ValueError: x=0.5 is a bad value")


def test_parameters_that_do_not_reload_to_the_same_predictions_fail_the_trial(
    platform: Platform, resources: WorkerResources
) -> None:
    trial_id = platform.add_trial("forgetful", 0.5)

    outcome = _run(platform, trial_id, resources)

    assert outcome.status is TrialState.ERRORED
    assert outcome.error == (
        "template error: a fresh instance loaded with the dumped parameters predicts 0.5 for query 0, where the "
        "trained model predicted 1.5; dump_parameters() must return everything load_parameters() needs"
    )
    assert not platform.artifacts.exists(params_key(trial_id))  # never stored, so never served


def test_once_a_trial_of_the_sub_job_has_a_score_the_reload_is_not_checked_again(
    platform: Platform, resources: WorkerResources
) -> None:
    checked = platform.add_trial("ok", 0.5)
    assert _run(platform, checked, resources).status is TrialState.COMPLETED
    # One checked trial per sub-job is enough: the template is the same for all of them.
    later = platform.add_trial("forgetful", 0.5)
    assert _run(platform, later, resources).status is TrialState.COMPLETED


def test_a_template_that_does_not_import_errors_with_its_traceback(
    platform: Platform, resources: WorkerResources
) -> None:
    trial_id = platform.add_trial(file="broken.py")

    outcome = _run(platform, trial_id, resources)

    trial = platform.trial(trial_id)
    assert outcome.status is TrialState.ERRORED
    assert set(outcome.phases) == {"fetch", "store"}  # it ended while the template was fetched and imported
    assert trial.error.startswith("cannot load the template: ") and "importing the template failed" in trial.error
    # The file imported is the template's artifact (<sha256>.py, fetched into the cache), line 3 of it.
    assert re.search(r'File "[^"]*/[0-9a-f]{64}\.py", line 3, in <module>', trial.traceback)
    assert "ImportError: this template needs a package that is not installed" in trial.traceback


@pytest.mark.parametrize("status", [TrialState.CANCELLED, TrialState.RUNNING, TrialState.COMPLETED])
def test_only_a_pending_trial_is_run(platform: Platform, resources: WorkerResources, status: TrialState) -> None:
    trial_id = platform.add_trial()
    platform.set_status(trial_id, status)
    with session_scope(platform.engine) as session:  # a RUNNING one on a live worker: it beat just now
        session.execute(update(Trial).where(Trial.id == trial_id).values(heartbeat_at=datetime.now(UTC)))

    outcome = _run(platform, trial_id, resources)

    assert not outcome.ran and outcome.status is status and outcome.phases == {}
    trial = platform.trial(trial_id)
    assert trial.status is status and trial.attempts == 0 and trial.worker is None and trial.started_at is None
    assert platform.logs(trial_id) == []
    missing = _run(platform, trial_id + 1000, resources)
    assert not missing.ran and missing.status is None


def test_progress_shows_while_running_and_a_stop_request_from_another_thread_ends_it_stopped(
    platform: Platform, resources: WorkerResources
) -> None:
    trial_id = platform.add_trial("until_stop", 0.25)
    context = TrialContext()
    outcomes = []
    runner = threading.Thread(target=lambda: outcomes.append(_run(platform, trial_id, resources, context=context)))
    runner.start()
    try:
        wait_until(lambda: (platform.signal_dir / "started-0.25").exists(), what="the trial to start")
        # Committed as they came, while train() still runs.
        wait_until(lambda: "step one done" in platform.logs(trial_id), what="the log line")
        assert platform.metrics(trial_id) == [(1, {"loss": 0.5, "accuracy": None})]
        running = platform.trial(trial_id)
        assert running.status is TrialState.RUNNING and running.finished_at is None
    finally:
        context.request_stop("the job's time budget is spent")
        runner.join(30)

    (outcome,) = outcomes
    assert outcome.status is TrialState.STOPPED and outcome.score == 0.25
    trial = platform.trial(trial_id)
    assert trial.status is TrialState.STOPPED and trial.score == 0.25 and trial.params_path == params_key(trial_id)
    assert platform.logs(trial_id)[-2:] == [
        "stopping: the job's time budget is spent",
        "stopped early: the job's time budget is spent",
    ]


def test_remote_artifacts_are_downloaded_once_checked_and_the_template_imported_once(
    platform: Platform, tmp_path: Path
) -> None:
    first, second = platform.add_trial("ok", 0.1), platform.add_trial("ok", 0.2, train_args={"other": 1})
    remote = ArtifactStore(f"memory://worker-tests-{uuid.uuid4().hex}")
    local = platform.artifacts
    for path in local.fs.find(local.url):  # the template and the datasets, under the same keys
        remote.put_bytes(Path(path).relative_to(local.url).as_posix(), local.fs.cat_file(path))
    cache = tmp_path / "cache"
    resources = WorkerResources(cache_dir=cache, name="remote-worker")

    def run(trial_id: int, resources: WorkerResources) -> TrialOutcome:  # a cluster worker: the store itself
        return run_trial(trial_id, resources, gateway=_gateway(platform, trial_id, artifacts=remote))

    assert run(first, resources).status is TrialState.COMPLETED
    assert run(second, resources).status is TrialState.COMPLETED  # another job, same template and data

    assert resources.files.downloads == 3 and resources.templates.imports == 1
    assert len([p for p in cache.rglob("*") if p.is_file()]) == 3
    assert platform.probe_line(first)["data"] == platform.probe_line(second)["data"]  # decoded once
    assert remote.exists(params_key(first)) and not local.exists(params_key(first))

    # A worker with an empty cache checks what it downloads against the registered checksum.
    remote.put_bytes(platform.dataset_key(0), b"a,b,y\n1,2,3\n")
    fresh = WorkerResources(cache_dir=tmp_path / "empty", name="fresh")
    outcome = run(platform.add_trial("ok", 0.3), fresh)
    assert outcome.status is TrialState.ERRORED
    assert outcome.error.startswith("cannot fetch the training dataset: artifact 'datasets/")
    assert "was replaced after it was registered" in outcome.error


# -- heartbeats (what a cluster worker does) ----------------------------------------------------


def test_heartbeats_pass_a_stop_reason_and_a_lost_claim_stops_the_trial(
    platform: Platform, resources: WorkerResources
) -> None:
    stopped = platform.add_trial("until_stop", 0.4)
    gateway = _gateway(platform, stopped, heartbeat_s=0.05)
    thread = threading.Thread(target=lambda: results.append(run_trial(stopped, resources, gateway=gateway)))
    results: list[Any] = []
    thread.start()
    wait_until(lambda: platform.trial(stopped).status is TrialState.RUNNING, what="the trial to run")
    with session_scope(platform.engine) as session:  # what CeleryExecutor.request_stop writes
        session.execute(update(Trial).where(Trial.id == stopped).values(stop_reason="time budget spent"))
    thread.join(20)
    assert results[0].status is TrialState.STOPPED and results[0].score == 0.4
    assert platform.trial(stopped).heartbeat_at > platform.trial(stopped).started_at

    cancelled = platform.add_trial("until_stop", 0.6)
    gateway = _gateway(platform, cancelled, heartbeat_s=0.05)
    thread = threading.Thread(target=lambda: results.append(run_trial(cancelled, resources, gateway=gateway)))
    thread.start()
    wait_until(lambda: platform.trial(cancelled).status is TrialState.RUNNING, what="the trial to run")
    platform.set_status(cancelled, TrialState.CANCELLED)  # what CeleryExecutor.cancel writes
    thread.join(20)
    assert results[1].status is TrialState.CANCELLED and results[1].score is None
    assert not platform.artifacts.exists(params_key(cancelled))  # no orphan parameters


def test_a_trial_past_its_time_limit_ends_errored_and_one_that_will_not_stop_is_given_up(
    platform: Platform, resources: WorkerResources, tmp_path: Path
) -> None:
    gave_up = threading.Event()
    stuck = platform.add_trial("wait", 0.5, train_args={"signal_dir": str(tmp_path)})  # deaf to stop requests
    gateway = _gateway(platform, stuck, heartbeat_s=0.05)
    thread = threading.Thread(
        target=run_trial, args=(stuck, resources), kwargs={"gateway": gateway, "time_limit_s": 0.3,
                                                           "on_overrun": gave_up.set},
    )  # fmt: skip
    thread.start()
    assert gave_up.wait(20)  # a cluster worker exits here; its pool process is replaced
    row = platform.trial(stuck)
    assert row.status is TrialState.ERRORED and row.error == "exceeded the per-trial time limit of 0.3 s"
    (tmp_path / "go-0.5").touch()  # let the template end, as the replaced process would not
    thread.join(20)
    assert platform.trial(stuck).status is TrialState.ERRORED  # its late outcome was not stored
