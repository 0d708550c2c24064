"""LocalExecutor with real worker processes, on SQLite and PostgreSQL.

Each test starts its own executor (one or two workers) on its own database, submits
PENDING trials of the probe template (templates/probe.py) and waits for
``TRIAL_FINISHED``, which must come exactly once per trial.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from worker_world import Platform

from baobab._prometheus import exposition
from baobab.store import EventKind, LocalEventChannel, TrialState, params_from_bytes
from baobab.testing import Scrape, wait_until
from baobab.worker import LocalExecutor
from baobab.worker._telemetry import Phase

MakeExecutor = Callable[..., LocalExecutor]


class Finished:
    """The TRIAL_FINISHED events of one test, counted per trial."""

    def __init__(self, events: LocalEventChannel) -> None:
        self._subscription = events.subscribe(EventKind.TRIAL_FINISHED)
        self.counts: Counter[int] = Counter()

    def wait(self, *trial_ids: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.counts[t] for t in trial_ids):
            if time.monotonic() > deadline:
                pytest.fail(f"no TRIAL_FINISHED within {timeout} s for trials {trial_ids}: {self.counts}")
            self._take(deadline - time.monotonic())

    def assert_once(self) -> None:
        """Every trial seen finished exactly once (a late duplicate would arrive within the drain)."""
        while self._take(0.2):
            pass
        assert set(self.counts.values()) <= {1}, self.counts

    def _take(self, timeout: float) -> bool:
        event = self._subscription.get(max(timeout, 0.0))
        if event is not None:
            self.counts[event.id] += 1
        return event is not None


@pytest.fixture
def events() -> LocalEventChannel:
    return LocalEventChannel()


@pytest.fixture
def finished(events: LocalEventChannel) -> Finished:
    return Finished(events)


@pytest.fixture
def make_executor(platform: Platform, events: LocalEventChannel) -> Iterator[MakeExecutor]:
    executors: list[LocalExecutor] = []

    def make(
        workers: int = 1, trial_timeout_s: float | None = None, trial_memory_mb: int | None = None
    ) -> LocalExecutor:
        settings = dataclasses.replace(
            platform.settings, trial_timeout_s=trial_timeout_s, trial_memory_mb=trial_memory_mb
        )
        executors.append(LocalExecutor(settings, events, api_url=platform.api_url, workers=workers))
        return executors[-1]

    yield make
    for executor in executors:
        executor.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pid(platform: Platform, trial_id: int) -> int:
    """The worker process of a running probe trial, once its log line is stored."""
    wait_until(lambda: any(line.startswith("probe ") for line in platform.logs(trial_id)), what="the probe line")
    return int(platform.probe_line(trial_id)["pid"])


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def test_a_trial_runs_in_a_worker_process_and_its_progress_shows_while_it_runs(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    trial_id = platform.add_trial("wait", 0.25)

    executor.submit(trial_id)
    executor.submit(trial_id)  # already held: ignored

    assert executor.slots == 1 and executor.active() == {trial_id}
    wait_until(lambda: (platform.signal_dir / "started-0.25").exists(), what="the trial to start")
    wait_until(lambda: "step one done" in platform.logs(trial_id), what="the trial's log lines")
    assert platform.metrics(trial_id) == [(1, {"loss": 0.5, "accuracy": None})]
    running = platform.trial(trial_id)
    assert running.status is TrialState.RUNNING and running.attempts == 1
    assert re.fullmatch(r".+:local-0:\d+", running.worker)
    probe = platform.probe_line(trial_id)
    assert int(probe["pid"]) != os.getpid() and running.worker.endswith(f":{probe['pid']}")
    assert probe["threads"] == str(_usable_cpus())  # one worker gets every core

    (platform.signal_dir / "go-0.25").touch()
    finished.wait(trial_id)

    trial = platform.trial(trial_id)
    assert trial.status is TrialState.COMPLETED and trial.score == 0.25
    assert params_from_bytes(platform.artifacts.get_bytes(trial.params_path))["x"].tolist() == [0.25]
    assert executor.active() == set()
    # What the template printed is in the trial's log and in the worker's own log file.
    worker_log = (platform.settings.home / "logs" / "worker-0.log").read_text()
    assert f"probe pid={probe['pid']}" in worker_log
    finished.assert_once()


def test_a_failing_or_dying_template_errors_and_a_dead_worker_is_replaced(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    raising, exiting, after_exit = platform.add_trial("raise"), platform.add_trial("exit"), platform.add_trial("ok")
    for trial_id in (raising, exiting, after_exit):
        executor.submit(trial_id)
    finished.wait(raising, exiting, after_exit)

    trial = platform.trial(raising)
    assert trial.status is TrialState.ERRORED and trial.error == "train() raised ValueError: x=0.5 is a bad value"
    assert re.search(r'\.py", line \d+, in train\n +raise ValueError', trial.traceback)
    trial = platform.trial(exiting)
    assert trial.status is TrialState.ERRORED
    assert trial.error == "the worker process exited with status 3 while running the trial"
    assert "last lines of the worker's log" in trial.traceback and trial.traceback.endswith("about to exit")
    assert platform.trial(after_exit).status is TrialState.COMPLETED
    # Log rows still in flight when the process died are lost; its log file's tail has them.
    exit_pid = re.search(r"probe pid=(\d+)", trial.traceback).group(1)
    assert platform.probe_line(raising)["pid"] == exit_pid  # a template error keeps the worker...
    assert platform.probe_line(after_exit)["pid"] != exit_pid  # ...a dead one is replaced

    # A segfault in C code: faulthandler's dump of the template's stack is in the report.
    segfault = platform.add_trial("segfault")
    executor.submit(segfault)
    finished.wait(segfault)
    crashed = platform.trial(segfault)
    assert crashed.error == "the worker process was killed by signal SIGSEGV while running the trial"
    assert "Fatal Python error: Segmentation fault" in crashed.traceback
    assert re.search(r'File "[^"]+\.py", line \d+ in train', crashed.traceback)  # faulthandler's stack

    # The OOM killer's SIGKILL, from outside, in the middle of a trial.
    waiting = platform.add_trial("wait", 0.75)
    executor.submit(waiting)
    wait_until(lambda: (platform.signal_dir / "started-0.75").exists(), what="the trial to start")
    os.kill(_pid(platform, waiting), signal.SIGKILL)
    finished.wait(waiting)
    trial = platform.trial(waiting)
    assert trial.status is TrialState.ERRORED
    assert trial.error == "the worker process was killed by signal SIGKILL (out of memory?) while running the trial"
    last = platform.add_trial("ok", 0.9)
    executor.submit(last)
    finished.wait(last)
    assert platform.trial(last).status is TrialState.COMPLETED
    finished.assert_once()


def test_what_the_workers_ran_and_the_time_of_each_phase_reach_this_process_metrics(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    # In `baobab up` this process is the API's: its /metrics shows the workers' trials.
    before = Scrape.parse(exposition()[0].decode())
    executor = make_executor(workers=1)
    completing, raising, exiting = platform.add_trial("ok"), platform.add_trial("raise"), platform.add_trial("exit")
    for trial_id in (completing, raising, exiting):
        executor.submit(trial_id)
    finished.wait(completing, raising, exiting)
    after = Scrape.parse(exposition()[0].decode())

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert moved("baobab_worker_trials_total", state="COMPLETED") == 1
    # the trial whose process exited is the executor's to end: no worker reported it
    assert moved("baobab_worker_trials_total", state="ERRORED") == 1
    phases = {phase: moved("baobab_worker_phase_seconds_count", phase=phase) for phase in Phase}
    # Waiting is the API's reading of the rows; these templates are no TorchModels: no warm start.
    assert phases == {
        "wait": 0, "fetch": 2, "warm_start": 0, "profile": 0, "build": 2, "train": 2, "evaluate": 1, "store": 2
    }  # fmt: skip
    assert moved("baobab_worker_phase_seconds_sum", phase="train") > 0


def test_a_trial_past_the_memory_limit_fails_saying_so_and_the_worker_goes_on(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1, trial_memory_mb=1024)
    hog, small, after = platform.add_trial("hog", 1.0), platform.add_trial("hog", 0.125), platform.add_trial("ok")
    for trial_id in (hog, small, after):
        executor.submit(trial_id)
    finished.wait(hog, small, after)

    trial = platform.trial(hog)
    assert trial.status is TrialState.ERRORED
    limit = (
        "train() exceeded the per-trial memory limit of 1024 MiB "
        "(the job's options.resources.memory_mb, else BAOBAB_TRIAL_MEMORY_MB)"
    )
    assert trial.error.startswith(f"{limit} (MemoryError: Unable to allocate 2.00 GiB"), trial.error
    assert platform.trial(small).status is TrialState.COMPLETED  # a quarter of a GiB fits
    assert platform.trial(after).status is TrialState.COMPLETED
    pids = {int(platform.probe_line(t)["pid"]) for t in (hog, small, after)}
    assert len(pids) == 1  # one worker ran all three: the refused allocation did not take it down
    finished.assert_once()


def test_a_launch_gets_the_threads_and_memory_its_job_asks_for_and_the_others_keep_the_slots_share(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1, trial_memory_mb=1024)
    resources = {"resources": {"threads": 3, "memory_mb": 1536}}
    plain, asking = platform.add_trial("ok", 0.1), platform.add_trial("ok", 0.2, options=resources)
    # Its data up to an eighth of a GiB below its own 1536 MiB: past the slot's 1024, whatever the libraries held.
    hog = platform.add_trial("fill", 0.125, options=resources)
    again = platform.add_trial("ok", 0.3)
    for trial_id in (plain, asking, hog, again):
        executor.submit(trial_id)
    finished.wait(plain, asking, hog, again)

    ended = [platform.trial(t) for t in (plain, asking, hog, again)]
    assert [t.status for t in ended] == [TrialState.COMPLETED] * 4, [t.error for t in ended]
    probes = {t: platform.probe_line(t) for t in (plain, asking, hog, again)}
    slot = str(max(1, _usable_cpus()))
    for t in (plain, again):  # the slot's share: its threads, its memory fixed for good before the template ran
        assert (probes[t]["threads"], probes[t]["blas"], probes[t]["memory_mb"]) == (slot, slot, "1024/1024")
    for t in (asking, hog):  # numpy was loaded before the launch said 3 threads: its pool follows all the same
        assert (probes[t]["threads"], probes[t]["blas"], probes[t]["memory_mb"]) == ("3", "3", "1536/1536")
    # A worker process serves one launch: the plain trials share one (the second was sent to it as soon as the
    # first ended), the asking job's trials another, started for them.
    assert probes[plain]["pid"] == probes[again]["pid"] != probes[asking]["pid"] == probes[hog]["pid"]
    (filled,) = [line for line in platform.logs(hog) if line.startswith("filled ")]
    fill = dict(part.split("=") for part in filled.split()[1:])
    assert 1024 < int(fill["data_mb"]) <= 1536 - 128
    # What the process held before the template's own data, a tabular dataset read: its libraries, not a GiB of
    # address space that Arrow's default allocator reserved (the data limit counts it).
    assert int(fill["held_mb"]) < 512, fill
    finished.assert_once()


def test_a_trial_past_the_time_limit_is_killed_and_errored(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1, trial_timeout_s=1.5)
    hanging, after = platform.add_trial("hang"), platform.add_trial("ok")
    submitted = datetime.now(UTC)
    executor.submit(hanging)
    executor.submit(after)
    finished.wait(hanging, after)

    trial = platform.trial(hanging)
    assert trial.status is TrialState.ERRORED and trial.error == "exceeded the per-trial time limit of 1.5 s"
    # The limit counts from the hand-over to the worker, which comes after the submit and before the
    # worker's claim (started_at, which waits for the worker to fetch and confine itself).
    assert 1.5 <= (trial.finished_at - submitted).total_seconds() < 30
    assert trial.started_at < trial.finished_at
    assert trial.traceback.startswith("killed; last lines of the worker's log")
    assert not _alive(int(platform.probe_line(hanging)["pid"]))
    assert platform.trial(after).status is TrialState.COMPLETED  # on a fresh worker
    finished.assert_once()


def test_cancel_drops_a_pending_trial_and_kills_a_running_one(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    running, pending = platform.add_trial("wait", 0.5), platform.add_trial("ok")
    executor.submit(running)
    executor.submit(pending)
    wait_until(lambda: (platform.signal_dir / "started-0.5").exists(), what="the trial to start")

    executor.cancel(pending, "the job was stopped")

    trial = platform.trial(pending)  # stored before cancel() returns
    assert trial.status is TrialState.CANCELLED and trial.error == "the job was stopped"
    assert trial.attempts == 0 and trial.started_at is None and trial.finished_at is not None
    assert executor.active() == {running}
    pid = _pid(platform, running)

    executor.cancel(running, "its grace period is over")

    trial = platform.trial(running)
    assert trial.status is TrialState.CANCELLED and trial.error == "its grace period is over"
    assert not _alive(pid) and executor.active() == set()
    finished.wait(pending, running)
    after = platform.add_trial("ok", 0.75)
    executor.submit(after)
    finished.wait(after)
    assert platform.trial(after).status is TrialState.COMPLETED
    executor.cancel(after, "too late")  # finished already: nothing changes, nothing is published
    assert platform.trial(after).status is TrialState.COMPLETED
    finished.assert_once()
    assert set(finished.counts) == {pending, running, after}


def test_request_stop_ends_a_running_or_queued_trial_stopped_with_its_score(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    first, queued = platform.add_trial("until_stop", 0.3), platform.add_trial("until_stop", 0.4)
    executor.submit(first)
    executor.submit(queued)
    wait_until(lambda: (platform.signal_dir / "started-0.3").exists(), what="the trial to start")

    executor.request_stop(queued, "the time budget is spent")  # reaches it when it starts
    executor.request_stop(first, "the time budget is spent")
    finished.wait(first, queued)

    for trial_id, score in ((first, 0.3), (queued, 0.4)):
        trial = platform.trial(trial_id)
        assert trial.status is TrialState.STOPPED and trial.score == score and trial.params_path is not None
        assert platform.logs(trial_id)[-1] == "stopped early: the time budget is spent"
    finished.assert_once()


def test_two_workers_run_two_trials_at_once(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=2)
    first, second = platform.add_trial("wait", 0.1), platform.add_trial("wait", 0.2)
    executor.submit(first)
    executor.submit(second)

    # Each waits for a file the test creates only once both have started.
    wait_until(
        lambda: all((platform.signal_dir / f"started-{x}").exists() for x in (0.1, 0.2)), what="both trials to start"
    )
    assert executor.slots == 2 and executor.active() == {first, second}
    for x in (0.1, 0.2):
        (platform.signal_dir / f"go-{x}").touch()
    finished.wait(first, second)

    trials = [platform.trial(t) for t in (first, second)]
    assert [t.status for t in trials] == [TrialState.COMPLETED] * 2
    assert {t.worker.split(":")[1] for t in trials} == {"local-0", "local-1"}
    assert platform.probe_line(first)["threads"] == str(max(1, _usable_cpus() // 2))
    finished.assert_once()


def test_a_worker_keeps_its_template_and_datasets_across_trials_and_jobs(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    trials = [platform.add_trial("ok", 0.1), platform.add_trial("ok", 0.2)]
    trials.append(platform.add_trial("ok", 0.3, train_args={"other_job": True}))  # another train job
    for trial_id in trials:
        executor.submit(trial_id)
    finished.wait(*trials)

    assert [platform.trial(t).status for t in trials] == [TrialState.COMPLETED] * 3
    probes = [platform.probe_line(t) for t in trials]
    assert len({p["pid"] for p in probes}) == 1  # one process
    assert {p["imports"] for p in probes} == {"1"}  # the template imported once
    assert len({p["data"] for p in probes}) == 1  # the dataset decoded once
    # A local artifact store is read in place: nothing was copied to the cache.
    cache = platform.settings.home / "cache"
    assert not cache.exists() or not any(cache.iterdir())
    finished.assert_once()


def test_close_kills_the_workers_and_leaves_the_trials_for_the_next_start(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    executor = make_executor(workers=1)
    running, queued = platform.add_trial("wait", 0.6), platform.add_trial("ok")
    executor.submit(running)
    executor.submit(queued)
    wait_until(lambda: (platform.signal_dir / "started-0.6").exists(), what="the trial to start")
    pid = _pid(platform, running)

    executor.close()

    assert platform.trial(running).status is TrialState.RUNNING  # a shutdown is no verdict on a trial
    assert platform.trial(queued).status is TrialState.PENDING
    assert not _alive(pid)
    assert executor.active() == set()
    finished.assert_once()
    assert not finished.counts  # nothing finished
    with pytest.raises(RuntimeError, match="closed"):
        executor.submit(platform.add_trial())
    executor.close()  # twice is fine


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # about the processes, not the database
def test_queued_trials_error_when_no_worker_process_can_start(
    platform: Platform, events: LocalEventChannel, finished: Finished, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers (python -m, which looks in the current folder first) find a broken baobab and die starting.
    broken = tmp_path / "broken" / "baobab"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('this baobab is broken')\n")
    monkeypatch.chdir(broken.parent)
    trial_id = platform.add_trial()
    with LocalExecutor(platform.settings, events, api_url=platform.api_url, workers=1) as executor:
        executor.submit(trial_id)
        finished.wait(trial_id)

    trial = platform.trial(trial_id)
    assert trial.status is TrialState.ERRORED
    assert trial.error.startswith("no worker process can start: the last one exited with status 1 while starting")
    assert "this baobab is broken" in trial.traceback  # the worker's own last words, from its log
    finished.assert_once()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_hundred_trials_back_to_back_each_finish_once(
    platform: Platform, make_executor: MakeExecutor, finished: Finished
) -> None:
    """Trials that do nothing (templates/noop.py), submitted at once to two workers: each is
    claimed once and completes, none lost to the race of two workers claiming. What a trial costs
    is measured by bench/overhead.py, not here."""
    executor = make_executor(workers=2)
    trials = [platform.add_trial(file="noop.py") for _ in range(100)]
    for trial_id in trials:
        executor.submit(trial_id)
    finished.wait(*trials)

    assert {platform.trial(t).status for t in trials} == {TrialState.COMPLETED}
    finished.assert_once()
