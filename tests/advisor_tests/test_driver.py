"""The job driver on a real store (SQLite and PostgreSQL) and a real LocalEventChannel.

The executor here, :class:`StandInExecutor`, is a stand-in for the worker processes
(``baobab.worker.LocalExecutor`` runs real templates; the platform tests drive the
driver with it). It implements the Executor protocol and writes each trial's states
to the store exactly as a worker does: RUNNING (started_at, worker, attempts + 1),
then COMPLETED with a score computed from the knobs, STOPPED when asked to stop,
ERRORED or CANCELLED, each final write conditional on the trial not having ended,
and only then publishes TRIAL_FINISHED. Its trials either last ``duration`` seconds
or, with ``hold=True``, run until the test releases them, so that tests decide when
slots free up instead of guessing at timings.

Tests of deadlines, grace periods and leases run the driver on a
:class:`~baobab.testing.VirtualClock` (the driver's ``clock``, and the stand-in's for the
times it writes), its loop turned by the test (:class:`Turns`): time moves only when
the test moves it, so each test checks what happens just before and at the second a
timer falls due, whatever the load of the machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, update
from sqlalchemy.exc import OperationalError

from baobab import Settings
from baobab._prometheus import exposition
from baobab.advisor import STRATEGIES, JobDriver, RandomStrategy, make_strategy
from baobab.advisor.driver._driver import PLACEMENT_RECORD_S
from baobab.exceptions import StrategyError
from baobab.model import (
    DatasetFormat,
    FixedKnob,
    FloatKnob,
    KnobConfig,
    PolicyKnob,
    Task,
    knob_config_to_json,
)
from baobab.store import (
    Dataset,
    Event,
    EventKind,
    JobStatus,
    LocalEventChannel,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    User,
    UserRole,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)
from baobab.testing import Scrape, VirtualClock, wait_until

CONFIG: KnobConfig = {"x": FloatKnob(0.0, 1.0), "epochs": FixedKnob(3), "early": PolicyKnob("EARLY_STOP")}
BROKEN: KnobConfig = {"x": FloatKnob(0.0, 1.0), "broken": FixedKnob(True)}
FLAKY: KnobConfig = {"x": FloatKnob(0.0, 1.0), "flaky": FixedKnob(True)}


def now() -> datetime:
    return datetime.now(UTC)


# -- the stand-in executor ---------------------------------------------------------------------


def score_of(knobs: dict[str, Any]) -> float:
    return -((knobs["x"] - 0.3) ** 2)


def default_outcome(number: int, knobs: dict[str, Any]) -> tuple[TrialState, float | None, str | None]:
    """What a template does with these knobs: ``broken`` templates always fail, ``flaky`` ones on numbers 1, 4, 7..."""
    if knobs.get("broken") or (knobs.get("flaky") and number % 3 == 1):
        return TrialState.ERRORED, None, f"RuntimeError: boom in trial {number}\nTraceback: ..."
    return TrialState.COMPLETED, score_of(knobs), None


@dataclass
class _Run:
    trial_id: int
    job_id: int
    wake: threading.Event = field(default_factory=threading.Event)
    stop_reason: str | None = None
    cancel_reason: str | None = None
    released: bool = False
    killed: bool = False
    started: threading.Event = field(default_factory=threading.Event)


class StandInExecutor:
    """A stand-in for the worker processes (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        events: LocalEventChannel,
        *,
        slots: int = 2,
        duration: float = 0.0,
        hold: bool = False,
        honour_stop: Callable[[int], bool] = lambda number: True,
        outcome: Callable[[int, dict[str, Any]], tuple[TrialState, float | None, str | None]] = default_outcome,
        publish: Callable[[int], bool] = lambda number: True,
        track_jobs: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.clock = clock  # epoch seconds of the times written to the store and recorded below
        self.events = events
        self._slots = slots
        self.duration = duration
        self.hold = hold
        self.honour_stop = honour_stop
        self.outcome = outcome
        self.publish = publish
        self.track_jobs = track_jobs
        self.lock = threading.Lock()
        self.runs: dict[int, _Run] = {}
        self.threads: list[threading.Thread] = []
        self.running_by_job: Counter[int] = Counter()
        self.max_by_job: Counter[int] = Counter()
        self.max_running = 0
        self.submitted: list[int] = []
        self.stop_requests: list[tuple[int, str, float]] = []
        self.cancels: list[tuple[int, str, float]] = []
        self.errors: list[BaseException] = []

    @property
    def slots(self) -> int:
        return self._slots

    def submit(self, trial_id: int) -> None:
        job_id = 0
        if self.track_jobs:  # a query in the driver's thread: off when measuring the driver
            with session_scope(self.engine) as session:
                job_id = session.scalar(
                    select(SubJob.train_job_id).join(Trial, Trial.sub_job_id == SubJob.id).where(Trial.id == trial_id)
                )
        run = _Run(trial_id, job_id)
        with self.lock:
            assert trial_id not in self.runs, f"trial {trial_id} submitted twice"
            self.runs[trial_id] = run
            self.submitted.append(trial_id)
            self.running_by_job[job_id] += 1
            self.max_by_job[job_id] = max(self.max_by_job[job_id], self.running_by_job[job_id])
            self.max_running = max(self.max_running, len(self.runs))
        thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self.threads.append(thread)
        thread.start()

    def request_stop(self, trial_id: int, reason: str) -> None:
        with self.lock:
            self.stop_requests.append((trial_id, reason, self.clock()))
            run = self.runs.get(trial_id)
        if run is not None:
            run.stop_reason = reason
            run.wake.set()

    def cancel(self, trial_id: int, reason: str) -> None:
        with self.lock:
            self.cancels.append((trial_id, reason, self.clock()))
            run = self.runs.get(trial_id)
        if run is not None:
            run.cancel_reason = reason
            run.wake.set()

    def active(self) -> set[int]:
        with self.lock:
            return set(self.runs)

    def close(self) -> None:
        for trial_id in self.active():
            self.cancel(trial_id, "the executor closed")
        self._join()

    def kill(self) -> None:
        """Vanish as a crashed platform would: trials stay PENDING/RUNNING in the store, nothing is published."""
        with self.lock:
            runs = list(self.runs.values())
            self.runs.clear()
        for run in runs:
            run.killed = True
            run.wake.set()
        self._join()

    def _join(self) -> None:
        for thread in self.threads:
            thread.join(10)
        assert not any(t.is_alive() for t in self.threads)

    # -- helpers for tests

    def held(self, job_id: int | None = None) -> list[int]:
        """Trials running now (started and not ended), of one job or all, oldest first."""
        with self.lock:
            return sorted(
                r.trial_id for r in self.runs.values() if r.started.is_set() and (job_id is None or r.job_id == job_id)
            )

    def release(self, trial_id: int) -> None:
        with self.lock:
            run = self.runs[trial_id]
        run.released = True
        run.wake.set()

    # -- the "worker"

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _run(self, run: _Run) -> None:
        try:
            self._work(run)
        except BaseException as e:  # noqa: BLE001 - recorded for the test to fail on
            self.errors.append(e)

    def _work(self, run: _Run) -> None:
        with session_scope(self.engine) as session:
            number, knobs = session.execute(select(Trial.number, Trial.knobs).where(Trial.id == run.trial_id)).one()
            session.execute(
                update(Trial)
                .where(Trial.id == run.trial_id, Trial.status == TrialState.PENDING)
                .values(
                    status=TrialState.RUNNING, started_at=self._now(), worker="stand-in", attempts=Trial.attempts + 1
                )
            )
        run.started.set()
        end = time.monotonic() + self.duration
        while True:
            timeout = None if self.hold else max(0.0, end - time.monotonic())
            run.wake.wait(timeout)
            run.wake.clear()
            if run.killed:
                return
            if run.cancel_reason is not None:
                state, score, error = TrialState.CANCELLED, None, run.cancel_reason
                break
            if run.stop_reason is not None and self.honour_stop(number):
                state, score, error = TrialState.STOPPED, score_of(knobs), None
                break
            if run.released or (not self.hold and time.monotonic() >= end):
                state, score, error = self.outcome(number, knobs)
                break
        with session_scope(self.engine) as session:
            session.execute(
                update(Trial)
                .where(Trial.id == run.trial_id, Trial.status.in_((TrialState.PENDING, TrialState.RUNNING)))
                .values(
                    status=state,
                    score=score,
                    error=error,
                    traceback=error,
                    finished_at=self._now(),
                    params_path=None if score is None else f"params/trial-{run.trial_id}.safetensors",
                )
            )
        with self.lock:
            if self.runs.pop(run.trial_id, None) is not None:
                self.running_by_job[run.job_id] -= 1
        if self.publish(number):
            self.events.publish(Event(EventKind.TRIAL_FINISHED, run.trial_id))


# -- the store -----------------------------------------------------------------------------------


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def events() -> LocalEventChannel:
    return LocalEventChannel()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env(environ={}, home=tmp_path, cpu_slots=2)


_names = itertools.count()


def make_job(
    engine: Engine,
    events: LocalEventChannel | None,
    budget: dict[str, Any],
    *,
    configs: tuple[KnobConfig, ...] = (CONFIG,),
    strategies: tuple[str, ...] | None = None,
    seeds: tuple[int, ...] | None = None,
    status: JobStatus = JobStatus.PENDING,
    started_at: datetime | None = None,
    knob_config_texts: tuple[str, ...] | None = None,
    options: dict[str, Any] | None = None,
) -> int:
    """A train job with one sub-job per knob config, written as the admin API writes it (and JOB_CREATED)."""
    n = next(_names)
    with session_scope(engine) as session:
        owner = session.scalar(select(User).where(User.email == "ada@example.com"))
        if owner is None:
            owner = User(email="ada@example.com", password_hash="x", role=UserRole.APP_DEVELOPER)
        dataset = Dataset(
            owner=owner, name="d", format=DatasetFormat.TABULAR, artifact_path="d", size_bytes=1, checksum="0"
        )
        job = TrainJob(
            owner=owner,
            app=f"app{n}",
            app_version=1,
            task=Task.TABULAR_CLASSIFICATION,
            train_dataset=dataset,
            val_dataset=dataset,
            budget=budget,
            status=status,
            started_at=started_at,
            options=options or {},
        )
        texts = knob_config_texts or tuple(knob_config_to_json(c) for c in configs)
        for i, text in enumerate(texts):
            template = ModelTemplate(
                owner=owner,
                name=f"model{n}_{i}",
                task=Task.TABULAR_CLASSIFICATION,
                class_name="M",
                artifact_path="t",
                checksum="0",
                access=ModelAccess.PRIVATE,
                knob_config=text,
            )
            session.add(
                SubJob(
                    train_job=job,
                    model_template=template,
                    strategy=strategies[i] if strategies else "random",
                    seed=seeds[i] if seeds else 1000 + i,
                    status=JobStatus.PENDING if started_at is None else JobStatus.RUNNING,
                )
            )
        session.add(job)
    if events is not None:
        events.publish(Event(EventKind.JOB_CREATED, job.id))
    return job.id


def job_row(engine: Engine, job_id: int) -> TrainJob:
    with session_scope(engine) as session:
        return session.get(TrainJob, job_id)


def sub_jobs(engine: Engine, job_id: int) -> list[SubJob]:
    with session_scope(engine) as session:
        return list(session.scalars(select(SubJob).where(SubJob.train_job_id == job_id).order_by(SubJob.id)))


def trials(engine: Engine, job_id: int) -> list[Trial]:
    with session_scope(engine) as session:
        return list(
            session.scalars(select(Trial).join(Trial.sub_job).where(SubJob.train_job_id == job_id).order_by(Trial.id))
        )


def driver_metrics() -> Scrape:
    """What this process's ``/metrics`` would show (the driver's metrics are the process's: cumulative)."""
    return Scrape.parse(exposition()[0].decode())


def wait_finished(engine: Engine, job_id: int, timeout: float = 20.0) -> TrainJob:
    return wait_until(
        lambda: (job := job_row(engine, job_id)).status.is_finished() and job,
        timeout=timeout,
        what=f"job {job_id} to finish",
    )


@contextmanager
def running(
    engine: Engine, executor: StandInExecutor, events: LocalEventChannel, settings: Settings, **options: Any
) -> Iterator[JobDriver]:
    """A driver thread for the block; the executor is closed afterwards (and must have raised nothing)."""
    options.setdefault("stop_check_s", 0.05)
    driver = JobDriver(engine, executor, events, settings, **options)
    stop = threading.Event()
    thread = threading.Thread(target=driver.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield driver
    finally:
        stop.set()
        thread.join(10)
        executor.close()
        assert not thread.is_alive()
        assert not executor.errors, executor.errors


class Turns:
    """The driver's loop (:meth:`JobDriver.run`: fire what is due and fill free slots, then handle the
    events that came) turned by the test, on the driver's clock; see the module docstring."""

    def __init__(self, driver: JobDriver, events: LocalEventChannel) -> None:
        self.driver = driver
        self.subscription = events.subscribe()  # every kind: those the driver does not handle it ignores

    def turn(self) -> None:
        """One pass of the loop, at the clock's time."""
        self.driver.step()
        while (event := self.subscription.get(timeout=0)) is not None:
            self.driver.handle(event)
        self.driver.step()

    def until(self, predicate: Callable[[], Any], what: str = "the condition") -> Any:
        """Turn the loop, the clock standing still, until ``predicate`` is true (its value)."""
        return wait_until(lambda: self.turn() or predicate(), what=what)


@contextmanager
def turned(
    engine: Engine, executor: StandInExecutor, events: LocalEventChannel, settings: Settings, **options: Any
) -> Iterator[Turns]:
    """A driver on ``executor.clock`` (a :class:`VirtualClock`) whose loop the test turns; the executor is
    closed afterwards (and must have raised nothing)."""
    driver = JobDriver(engine, executor, events, settings, clock=executor.clock, **options)
    turns = Turns(driver, events)
    try:
        yield turns
    finally:
        turns.subscription.close()
        driver.release_leases()
        executor.close()
        assert not executor.errors, executor.errors


def finished(engine: Engine, job_id: int) -> TrainJob | None:
    """The job's row once it has finished."""
    job = job_row(engine, job_id)
    return job if job.status.is_finished() else None


# -- budgets -------------------------------------------------------------------------------------


def test_trial_count_is_spent_exactly_per_sub_job(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=4, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 5}, configs=(CONFIG, CONFIG), seeds=(7, 8))
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED and job.error is None
    assert job.started_at is not None and job.finished_at is not None and job.started_at <= job.finished_at
    subs = sub_jobs(engine, job_id)
    assert [s.status for s in subs] == [JobStatus.COMPLETED, JobStatus.COMPLETED]
    rows = trials(engine, job_id)
    for sub in subs:
        mine = [t for t in rows if t.sub_job_id == sub.id]
        assert sorted(t.number for t in mine) == [0, 1, 2, 3, 4]
        assert all(t.status is TrialState.COMPLETED and t.attempts == 1 for t in mine)
        expected = make_strategy("random", CONFIG, seed=sub.seed)
        for t in mine:
            # Every knob the template gets: the proposal, the fixed knob, each policy knob off.
            assert t.knobs == {**expected.propose(t.number), "epochs": 3, "early": False}
            assert t.policies == {"EARLY_STOP": False}
            assert t.score == pytest.approx(score_of(t.knobs))
    assert executor.max_running <= settings.cpu_slots == 2
    assert len(executor.submitted) == 10 == len(set(executor.submitted))


def test_the_placement_planner_places_the_trials_once_it_has_measurements(
    engine: Engine, events: LocalEventChannel, tmp_path: Path
) -> None:
    """Under ``placement=search`` the first trials go by the rules (nothing measured yet), the rest by the
    planner's plans; every trial runs once and the slots are never overdrawn."""
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=2, placement="search")
    executor = StandInExecutor(engine, events, slots=2, duration=0.02)
    with running(engine, executor, events, settings) as driver:
        first = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6}, configs=(CONFIG, CONFIG), seeds=(1, 2))
        second = make_job(engine, events, {"MODEL_TRIAL_COUNT": 5})
        for job_id in (first, second):
            assert wait_finished(engine, job_id).status is JobStatus.COMPLETED
        assert driver.planner is not None and driver.planner.last is not None  # it planned
        # the last decision, with one job left to serve, may have had nothing to search: fcfs's plan then
        assert driver.planner.last.method in {"search", "fcfs"} and driver.planner.last.outcome is not None
    for job_id in (first, second):  # each job keeps what the planner predicted for it
        placement = job_row(engine, job_id).placement
        assert placement is not None and placement["method"] == "search"
        assert placement["predictions"], placement
        at, finish, utilisation = placement["predictions"][0]
        assert datetime.fromisoformat(at) <= datetime.fromisoformat(finish) and 0 < utilisation <= 1
    for job_id, count in ((first, 12), (second, 5)):
        rows = trials(engine, job_id)
        assert len(rows) == count and all(t.status is TrialState.COMPLETED and t.attempts == 1 for t in rows)
        for sub in sub_jobs(engine, job_id):
            assert sorted(t.number for t in rows if t.sub_job_id == sub.id) == list(
                range(count // len(sub_jobs(engine, job_id)))
            )
    assert executor.max_running <= 2
    assert len(executor.submitted) == 17 == len(set(executor.submitted))


def test_gpu_count_and_cpu_slots_cap_concurrency(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    executor = StandInExecutor(engine, events, slots=4, hold=True)

    def run_through(job_id: int, share: int) -> None:
        """Wait until the job runs ``share`` trials at once, then let every trial end as it starts."""
        wait_until(lambda: len(executor.held(job_id)) == share, what=f"{share} trials of job {job_id} at once")
        released: set[int] = set()

        def release_what_runs() -> TrainJob | None:
            for trial_id in set(executor.held(job_id)) - released:
                executor.release(trial_id)
                released.add(trial_id)
            return finished(engine, job_id)

        wait_until(release_what_runs, what=f"job {job_id} to finish")

    with running(engine, executor, events, settings):
        gpus = make_job(engine, events, {"MODEL_TRIAL_COUNT": 9, "GPU_COUNT": 3})
        run_through(gpus, 3)
        cpus = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6, "GPU_COUNT": 0}, configs=(CONFIG, CONFIG))
        run_through(cpus, settings.cpu_slots)
        capped = make_job(engine, events, {"MODEL_TRIAL_COUNT": 8, "GPU_COUNT": 6})
        run_through(capped, executor.slots)
    # Each job filled its share at once (trials end only when released), and never went beyond it; the
    # executor's slots cap them all.
    assert executor.max_by_job[gpus] == 3
    assert executor.max_by_job[cpus] == settings.cpu_slots == 2
    assert executor.max_by_job[capped] == executor.slots == 4
    assert executor.max_running == 4
    assert [len(trials(engine, j)) for j in (gpus, cpus, capped)] == [9, 12, 8]


class WeighingExecutor(StandInExecutor):
    """Four one-core slots, as a local executor on four cores tells; keeps the most slots its trials held at once
    (a trial of a job asking for two threads holding two)."""

    slot_threads = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.peak_slots = 0

    def submit(self, trial_id: int) -> None:
        super().submit(trial_id)
        with session_scope(self.engine) as session:
            wide = {job_id for job_id, options in session.execute(select(TrainJob.id, TrainJob.options)) if options}
        with self.lock:
            held = sum(count * (2 if job_id in wide else 1) for job_id, count in self.running_by_job.items())
            self.peak_slots = max(self.peak_slots, held)


def test_a_launch_asking_for_more_threads_than_a_slot_has_holds_that_many_slots(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = WeighingExecutor(engine, events, slots=4, hold=True)
    settings = dataclasses.replace(settings, cpu_slots=4)
    with running(engine, executor, events, settings):
        wide = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6, "GPU_COUNT": 0}, options={"resources": {"threads": 2}})
        wait_until(lambda: len(executor.held(wide)) == 2, what="two launches of two threads")
        plain = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6, "GPU_COUNT": 0})
        # Nothing is free: the wide job holds the four slots. As one of its launches ends, its two slots
        # go to the plain job (fewer units running), whose one-slot trials fill them.
        executor.release(executor.held(wide)[0])
        wait_until(lambda: len(executor.held(plain)) == 2, what="the plain job in the freed slots")
        for job_id in (wide, plain):
            while finished(engine, job_id) is None:
                for trial_id in executor.held(job_id):
                    executor.release(trial_id)
                time.sleep(0.01)
    assert executor.max_by_job[wide] == 2  # 2 x 2 threads on 4 one-core slots, never 3
    assert executor.peak_slots == 4  # the slots filled, never overfilled
    assert [len(trials(engine, j)) for j in (wide, plain)] == [6, 6]


def test_two_jobs_share_the_slots_fairly(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    executor = StandInExecutor(engine, events, slots=4, hold=True, clock=VirtualClock())
    budget = {"MODEL_TRIAL_COUNT": 50, "GPU_COUNT": 4}
    with turned(engine, executor, events, settings) as loop:
        first = make_job(engine, events, budget)
        loop.until(lambda: len(executor.held(first)) == 4, "the first job to take every slot")
        second = make_job(engine, events, budget)
        loop.until(lambda: second in loop.driver.jobs, "the second job to be taken up")
        loop.turn()
        assert executor.max_by_job[second] == 0  # no slot is free: running trials are never preempted

        def release(*job_ids: int) -> tuple[int, int]:
            """Let the oldest trial of each job end; the split of the slots once they are all taken again."""
            released = [executor.held(job_id)[0] for job_id in job_ids]
            for trial_id in released:
                executor.release(trial_id)
            loop.until(
                lambda: not set(released) & executor.active() and len(executor.held()) == 4,
                "the released trials to end and every slot to be taken again",
            )
            return len(executor.held(first)), len(executor.held(second))

        assert release(first) == (3, 1)  # the freed slot goes to the job with the fewest running trials
        assert release(first) == (2, 2)
        assert release(second) == (2, 2)  # equal shares: each job gets its own slot back
        assert release(first) == (2, 2)
        assert release(first, second) == (2, 2)
    assert executor.max_running == 4


def test_a_time_budget_starts_no_trial_that_cannot_end_in_time(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    clock = VirtualClock()
    executor = StandInExecutor(engine, events, slots=1, hold=True, clock=clock)
    hours = 0.01  # 36 s: room for four trials of 8 s, with 4 s left over
    with turned(engine, executor, events, settings, grace_s=0.2) as loop:
        job_id = make_job(engine, events, {"TIME_HOURS": hours, "GPU_COUNT": 1})
        ran: list[int] = []
        for _ in range(4):
            trial_id = loop.until(lambda: next(iter(set(executor.held(job_id)) - set(ran)), None), "the next trial")
            ran.append(trial_id)
            clock.advance(clock() + 8.0)
            executor.release(trial_id)
        # At 32 s a trial of the median 8 s would end after the deadline: none starts, and the job ends.
        job = loop.until(lambda: finished(engine, job_id), "the job to end")
    assert job.status is JobStatus.COMPLETED
    deadline = job.started_at + timedelta(hours=hours)
    assert job.finished_at == deadline - timedelta(seconds=4)  # at once, not at the deadline
    rows = trials(engine, job_id)
    assert [t.id for t in rows] == ran and executor.submitted == ran
    assert all(t.status is TrialState.COMPLETED for t in rows)
    assert all(t.submitted_at <= deadline - timedelta(seconds=8) for t in rows), (deadline, rows)


def test_at_the_deadline_trials_are_asked_to_stop_then_cancelled(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    # Trial 0 stops when asked (its score counts); trial 1 ignores the request and is cancelled after the grace.
    clock = VirtualClock()
    executor = StandInExecutor(engine, events, slots=4, hold=True, honour_stop=lambda number: number == 0, clock=clock)
    hours, grace = 0.01, 3.0
    with turned(engine, executor, events, settings, grace_s=grace) as loop:
        job_id = make_job(engine, events, {"TIME_HOURS": hours, "GPU_COUNT": 2})
        loop.until(lambda: len(executor.held(job_id)) == 2, "two trials running")
        deadline = job_row(engine, job_id).started_at.timestamp() + hours * 3600
        clock.advance(deadline - 0.001)
        loop.turn()
        assert executor.stop_requests == [] and job_row(engine, job_id).status is JobStatus.RUNNING
        clock.advance(deadline)
        loop.turn()
        assert job_row(engine, job_id).status is JobStatus.STOPPING
        rows = trials(engine, job_id)
        assert sorted(i for i, _, _ in executor.stop_requests) == [rows[0].id, rows[1].id]
        assert all(at == deadline and "time budget" in reason for _, reason, at in executor.stop_requests)
        loop.until(lambda: trials(engine, job_id)[0].status is TrialState.STOPPED, "trial 0 to stop")
        clock.advance(deadline + grace - 0.001)
        loop.turn()
        assert executor.cancels == []
        clock.advance(deadline + grace)
        loop.turn()
        assert [(i, at) for i, _, at in executor.cancels] == [(rows[1].id, deadline + grace)]
        job = loop.until(lambda: finished(engine, job_id), "the job to end")
    assert job.status is JobStatus.COMPLETED
    rows = trials(engine, job_id)
    assert [(t.number, t.status) for t in rows] == [(0, TrialState.STOPPED), (1, TrialState.CANCELLED)]
    assert rows[0].score is not None
    reason = executor.cancels[0][1]
    assert "time budget" in reason and "3 s later" in reason
    assert rows[1].error == reason
    assert [s.status for s in sub_jobs(engine, job_id)] == [JobStatus.COMPLETED]


def test_a_user_stop_stops_then_cancels_and_ends_the_job_stopped(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    clock = VirtualClock()
    executor = StandInExecutor(engine, events, slots=4, hold=True, honour_stop=lambda number: number == 0, clock=clock)
    grace = 0.3
    with turned(engine, executor, events, settings, grace_s=grace) as loop:
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 10})
        loop.until(lambda: len(executor.held(job_id)) == 2, "two trials running")
        clock.advance(clock() + 5.0)
        with session_scope(engine) as session:  # what POST .../stop does
            session.execute(update(TrainJob).where(TrainJob.id == job_id).values(status=JobStatus.STOPPING))
        asked = clock()
        events.publish(Event(EventKind.JOB_STOPPED, job_id))
        # A job stopped before the driver took it up ends at once, with no trial.
        early = make_job(engine, None, {"MODEL_TRIAL_COUNT": 10}, status=JobStatus.STOPPING)
        events.publish(Event(EventKind.JOB_STOPPED, early))
        loop.turn()
        assert len(executor.stop_requests) == 2  # at once
        assert all(at == asked and reason == "a user stopped the job" for _, reason, at in executor.stop_requests)
        assert loop.until(lambda: finished(engine, early), "the early job to end").status is JobStatus.STOPPED
        loop.until(lambda: trials(engine, job_id)[0].status is TrialState.STOPPED, "trial 0 to stop")
        clock.advance(asked + grace - 0.001)
        loop.turn()
        assert executor.cancels == []
        clock.advance(asked + grace)
        loop.turn()
        job = loop.until(lambda: finished(engine, job_id), "the job to end")
    assert job.status is JobStatus.STOPPED
    rows = trials(engine, job_id)
    assert [(t.number, t.status) for t in rows] == [(0, TrialState.STOPPED), (1, TrialState.CANCELLED)]
    assert [(i, at) for i, _, at in executor.cancels] == [(rows[1].id, asked + grace)]
    assert [s.status for s in sub_jobs(engine, job_id)] == [JobStatus.STOPPED]
    assert trials(engine, early) == [] and [s.status for s in sub_jobs(engine, early)] == [JobStatus.STOPPED]


# -- errors --------------------------------------------------------------------------------------


def test_errored_trials_count_and_a_broken_template_stops_after_max_errors(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    settings = Settings.from_env(environ={}, home=settings.home, cpu_slots=1)
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings, max_errors=3):
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6}, configs=(FLAKY, BROKEN))
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED
    flaky, broken = sub_jobs(engine, job_id)
    rows = trials(engine, job_id)
    # Errored trials spend the budget like any other.
    mine = sorted((t.number, t.status) for t in rows if t.sub_job_id == flaky.id)
    assert mine == [(n, TrialState.ERRORED if n % 3 == 1 else TrialState.COMPLETED) for n in range(6)]
    assert flaky.status is JobStatus.COMPLETED
    # The broken template spends max_errors trials, not its whole count.
    assert sorted((t.number, t.status) for t in rows if t.sub_job_id == broken.id) == [
        (n, TrialState.ERRORED) for n in range(3)
    ]
    assert broken.status is JobStatus.ERRORED
    assert "first 3 trials all errored" in broken.error and "RuntimeError: boom in trial 2" in broken.error


def test_metrics_count_trials_by_state_and_proposals_and_show_busy_slots(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    before = driver_metrics()
    executor = StandInExecutor(engine, events, slots=3, hold=True)
    with running(engine, executor, events, settings):
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 5, "GPU_COUNT": 0}, configs=(FLAKY,))
        wait_until(lambda: len(executor.held(job_id)) == 2, what="the job's two CPU slots taken")
        # a job of GPU_COUNT=0 runs settings.cpu_slots (2) trials at once: 2 of the executor's 3 slots
        load = {"jobs": 1, "trials_active": 2, "slots": 3, "slots_busy": 2, "units_queued": 0}
        wait_until(
            lambda: {name: driver_metrics().value(f"baobab_driver_{name}") for name in load} == load,
            what=f"the gauges at {load}",
        )

        def release_all() -> bool:
            for trial_id in executor.held(job_id):
                executor.release(trial_id)
            return job_row(engine, job_id).status.is_finished()

        wait_until(release_all, what="the job to end")
        wait_until(lambda: driver_metrics().value("baobab_driver_jobs") == 0, what="the driver to drop the job")
    after = driver_metrics()

    def moved(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert moved("baobab_driver_trials_started_total") == 5
    # FLAKY trials fail on numbers 1 and 4
    assert moved("baobab_driver_trials_finished_total", state="COMPLETED") == 3
    assert moved("baobab_driver_trials_finished_total", state="ERRORED") == 2
    assert moved("baobab_driver_proposal_seconds_count") == 5  # a unit of work per trial: no fusion here
    assert moved("baobab_driver_proposal_seconds_sum") > 0
    strategies = {labels["strategy"] for labels in after.series("baobab_driver_proposal_seconds_count")}
    assert strategies <= set(STRATEGIES)
    assert after.value("baobab_driver_trials_active") == 0 and after.value("baobab_driver_slots_busy") == 0


def test_a_strategy_error_ends_its_sub_job_errored(
    engine: Engine, events: LocalEventChannel, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    propose = RandomStrategy.propose

    def failing(self: RandomStrategy, trial_id: int, pending: Any = ()) -> Any:
        if trial_id >= 3:
            raise StrategyError("nothing left to propose")
        return propose(self, trial_id, pending)

    monkeypatch.setattr(RandomStrategy, "propose", failing)
    errors_before = driver_metrics().value("baobab_driver_proposal_errors_total", strategy="random")
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings):
        job_id = make_job(
            engine, events, {"MODEL_TRIAL_COUNT": 5}, configs=(CONFIG, CONFIG), strategies=("random", "grid")
        )
        job = wait_finished(engine, job_id)
        # The driver goes on: the next job runs (its sub-job uses bayes).
        other = make_job(engine, events, {"MODEL_TRIAL_COUNT": 2}, strategies=("bayes",))
        assert wait_finished(engine, other).status is JobStatus.COMPLETED
    proposing, unknown = sub_jobs(engine, job_id)
    assert len([t for t in trials(engine, job_id) if t.sub_job_id == proposing.id]) == 3
    assert proposing.status is JobStatus.ERRORED and "failed to propose trial 3" in proposing.error
    assert "nothing left to propose" in proposing.error
    assert unknown.status is JobStatus.ERRORED and "unknown strategy 'grid'" in unknown.error
    assert not [t for t in trials(engine, job_id) if t.sub_job_id == unknown.id]
    assert job.status is JobStatus.ERRORED
    assert "no model template completed a trial" in job.error and "unknown strategy 'grid'" in job.error
    assert driver_metrics().value("baobab_driver_proposal_errors_total", strategy="random") == errors_before + 1


def test_an_error_on_one_job_ends_that_job_only(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings):
        bad_budget = make_job(engine, events, {"MODEL_TRIAL_COUNT": 0})
        bad_config = make_job(
            engine,
            events,
            {"MODEL_TRIAL_COUNT": 2},
            knob_config_texts=(knob_config_to_json(CONFIG), '{"x": {"type": "NoSuchKnob"}}'),
        )
        good = make_job(engine, events, {"MODEL_TRIAL_COUNT": 2})
        assert wait_finished(engine, good).status is JobStatus.COMPLETED
        job = wait_finished(engine, bad_budget)
        mixed = wait_finished(engine, bad_config)
    assert job.status is JobStatus.ERRORED and "MODEL_TRIAL_COUNT" in job.error and job.finished_at is not None
    assert [s.status for s in sub_jobs(engine, bad_budget)] == [JobStatus.ERRORED]
    assert mixed.status is JobStatus.COMPLETED  # one template's knob config is unreadable; the other ran
    readable, unreadable = sub_jobs(engine, bad_config)
    assert readable.status is JobStatus.COMPLETED
    assert unreadable.status is JobStatus.ERRORED and "unknown knob type 'NoSuchKnob'" in unreadable.error


# -- restarts ------------------------------------------------------------------------------------


def test_a_restarted_driver_finishes_the_job_with_the_same_proposals(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    seeds = (123456789, 2**62 + 5)
    first = StandInExecutor(engine, events, slots=2, hold=True)
    driver = JobDriver(engine, first, events, settings, stop_check_s=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=driver.run, args=(stop,), daemon=True)
    thread.start()
    job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 6}, configs=(CONFIG, CONFIG), seeds=seeds)
    for _ in range(5):
        trial_id = wait_until(lambda: executor_held_two(first, job_id), what="two trials running")
        first.release(trial_id)
        wait_until(lambda released=trial_id: released not in first.active())
    wait_until(lambda: len(first.held(job_id)) == 2)
    # The platform dies: the driver thread stops, the executor vanishes with two trials RUNNING.
    stop.set()
    thread.join(10)
    lost = first.held(job_id)
    first.kill()
    assert [t.status for t in trials(engine, job_id) if t.id in lost] == [TrialState.RUNNING] * 2

    second = StandInExecutor(engine, events, slots=2, duration=0.01)
    with running(engine, second, events, settings):
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED
    rows = trials(engine, job_id)
    for sub in sub_jobs(engine, job_id):
        mine = [t for t in rows if t.sub_job_id == sub.id]
        assert sorted(t.number for t in mine) == list(range(6))  # none lost, none twice
        uninterrupted = make_strategy("random", CONFIG, seed=sub.seed)
        assert {t.number: t.knobs["x"] for t in mine} == {n: uninterrupted.propose(n)["x"] for n in range(6)}
        assert all(t.status is TrialState.COMPLETED for t in mine)
    # The two lost trials ran again in their own rows; no other trial was touched.
    assert sorted(t.id for t in rows if t.attempts == 2) == sorted(lost)
    assert all(t.attempts == 1 for t in rows if t.id not in lost)
    assert sorted(second.submitted)[:2] == sorted(lost)


def executor_held_two(executor: StandInExecutor, job_id: int) -> int | None:
    held = executor.held(job_id)
    return held[0] if len(held) == 2 else None


def test_lost_trials_are_resubmitted_until_lost_too_often(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    started = now() - timedelta(seconds=5)
    job_id = make_job(engine, None, {"MODEL_TRIAL_COUNT": 4}, status=JobStatus.RUNNING, started_at=started, seeds=(9,))
    (sub,) = sub_jobs(engine, job_id)
    proposals = make_strategy("random", CONFIG, seed=9)
    finished_at = now() - timedelta(seconds=1)
    with session_scope(engine) as session:
        for number, status, attempts in [
            (0, TrialState.RUNNING, 3),
            (1, TrialState.PENDING, 0),
            (2, TrialState.COMPLETED, 1),
        ]:
            knobs = {**proposals.propose(number), "epochs": 3, "early": False}
            session.add(
                Trial(
                    sub_job_id=sub.id,
                    number=number,
                    knobs=knobs,
                    status=status,
                    attempts=attempts,
                    score=1.0 if status is TrialState.COMPLETED else None,
                    started_at=started if attempts else None,
                    finished_at=finished_at if status is TrialState.COMPLETED else None,
                )
            )
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings):
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED
    rows = {t.number: t for t in trials(engine, job_id)}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[0].status is TrialState.ERRORED and "lost 3 times" in rows[0].error and rows[0].attempts == 3
    assert rows[1].status is TrialState.COMPLETED and rows[1].attempts == 1
    assert rows[2].score == 1.0 and rows[2].finished_at == finished_at  # finished trials are not touched
    assert rows[3].knobs["x"] == proposals.propose(3)["x"]
    assert sorted(executor.submitted) == [rows[1].id, rows[3].id]


def test_a_deadline_that_passed_while_the_driver_was_down_stops_the_job(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    started = now() - timedelta(hours=1)
    job_id = make_job(engine, None, {"TIME_HOURS": 0.5}, status=JobStatus.RUNNING, started_at=started)
    (sub,) = sub_jobs(engine, job_id)
    with session_scope(engine) as session:
        session.add(Trial(sub_job_id=sub.id, number=0, knobs={"x": 0.5}, status=TrialState.COMPLETED, score=0.5))
        session.add(Trial(sub_job_id=sub.id, number=1, knobs={"x": 0.6}, status=TrialState.RUNNING, attempts=1))
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings):
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED
    rows = trials(engine, job_id)
    assert [(t.number, t.status) for t in rows] == [(0, TrialState.COMPLETED), (1, TrialState.CANCELLED)]
    assert "time budget" in rows[1].error
    assert executor.submitted == []


# -- waking up -----------------------------------------------------------------------------------


def test_the_driver_wakes_on_events_and_is_idle_otherwise(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    executor = StandInExecutor(engine, events, slots=2)
    with running(engine, executor, events, settings, rescan_s=600) as driver:
        wait_finished(engine, make_job(engine, events, {"MODEL_TRIAL_COUNT": 1}))
        wakeups = count_calls(driver, "wait_s")  # once per pass of the loop, before it waits again
        wait_until(lambda: wakeups[0] >= 2, what="the driver to wait again")
        statements.clear()
        began = wakeups[0]
        wait_until(lambda: wakeups[0] >= began + 10, what="ten wake-ups of the stop check")
        assert statements == []  # and no query
        # The next rescan is ten minutes away: only the event takes the new job up.
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 1})
        wait_finished(engine, job_id)


def count_calls(obj: Any, name: str) -> list[int]:
    """Count the calls of ``obj``'s method ``name`` from now on (the count is the list's only item)."""
    calls, method = [0], getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return method(*args, **kwargs)

    setattr(obj, name, counted)
    return calls


def test_the_rescan_catches_lost_events(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    # No JOB_CREATED, and the TRIAL_FINISHED of every trial numbered 1 is never published.
    executor = StandInExecutor(engine, events, slots=2, publish=lambda number: number != 1)
    with running(engine, executor, events, settings, rescan_s=0.3):
        job_id = make_job(engine, None, {"MODEL_TRIAL_COUNT": 3})
        job = wait_finished(engine, job_id)
        assert job.status is JobStatus.COMPLETED
    assert len(trials(engine, job_id)) == 3
    assert all(t.status is TrialState.COMPLETED for t in trials(engine, job_id))


# -- cost ----------------------------------------------------------------------------------------


class InstantExecutor:
    """Holds what is submitted until the test ends it: the driver's work is then all the test times."""

    slots = 2

    def __init__(self) -> None:
        self.queue: list[int] = []

    def submit(self, trial_id: int) -> None:
        self.queue.append(trial_id)

    def request_stop(self, trial_id: int, reason: str) -> None:
        raise AssertionError("nothing is stopped in a count-only job")

    def cancel(self, trial_id: int, reason: str) -> None:
        raise AssertionError("nothing is cancelled in a count-only job")

    def active(self) -> set[int]:
        return set(self.queue)

    def close(self) -> None:
        pass


def test_the_driver_costs_one_insert_and_one_read_per_trial(engine: Engine, settings: Settings) -> None:
    """The driver's share of a trial is two statements, and the placement planner's outlook of the job is
    stored at most once per ``PLACEMENT_RECORD_S`` of the driver's clock (here a virtual one, moved 0.1 s
    per trial); how long they take, ``bench/scale.py`` measures (a timed assertion here failed whenever the
    machine was busy)."""
    n = 200
    settings = Settings.from_env(environ={}, home=settings.home, cpu_slots=2, placement="search")  # outlooks
    executor = InstantExecutor()
    clock = VirtualClock()
    driver = JobDriver(engine, executor, LocalEventChannel(), settings, clock=clock)
    job_id = make_job(engine, None, {"MODEL_TRIAL_COUNT": n})
    driver.step()  # the first rescan takes the job up and fills both slots
    statements: list[str] = []
    timing = False

    def count(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if timing and not statement.startswith("BEGIN"):
            table = re.search(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", statement)
            statements.append(f"{statement.split(None, 1)[0]} {table and table.group(1)}")

    event.listen(engine, "before_cursor_execute", count)
    began = clock()
    while executor.queue:
        clock.advance(clock() + 0.1)
        trial_id = executor.queue.pop(0)
        with session_scope(engine) as session:  # the worker's part, not counted
            session.execute(
                update(Trial)
                .where(Trial.id == trial_id)
                .values(status=TrialState.COMPLETED, score=0.5, started_at=now(), finished_at=now())
            )
        timing = True
        driver.handle(Event(EventKind.TRIAL_FINISHED, trial_id))
        driver.step()
        timing = False
    counted = Counter(statements)
    outlooks = counted.pop("SELECT train_jobs", 0)  # each a read and an update of the job's placement
    assert 1 <= outlooks <= 1 + (clock() - began) / PLACEMENT_RECORD_S
    # Per trial: the read of its row when it finished, the insert of the next one; then the end of the job.
    assert counted == {
        "SELECT trials": n,
        "INSERT trials": n - 2,
        "UPDATE sub_jobs": 1,
        "UPDATE train_jobs": 1 + outlooks,
    }
    assert job_row(engine, job_id).status is JobStatus.COMPLETED and len(trials(engine, job_id)) == n


def test_a_pass_stores_all_its_trials_in_one_insert_and_a_batch_of_finishes_is_read_at_once(
    engine: Engine, settings: Settings
) -> None:
    """When many slots free at once, the driver's cost does not grow with them: one read of every
    finished trial's row, one insert of every new trial, each trial in the store before it is submitted."""
    slots = 40
    settings = Settings.from_env(environ={}, home=settings.home, cpu_slots=slots)
    submitted_pending: list[bool] = []
    statements: list[str] = []
    counting = False

    class Checking(InstantExecutor):
        def submit(self, trial_id: int) -> None:
            nonlocal counting
            counting, was = False, counting  # the check is the test's read, not the driver's
            with session_scope(engine) as session:  # another connection: only what was committed
                submitted_pending.append(session.get(Trial, trial_id).status is TrialState.PENDING)
            counting = was
            super().submit(trial_id)

    executor = Checking()
    executor.slots = slots
    driver = JobDriver(engine, executor, LocalEventChannel(), settings, clock=VirtualClock())
    job_id = make_job(engine, None, {"MODEL_TRIAL_COUNT": 3 * slots})
    driver.step()  # takes the job up and fills every slot
    first = list(executor.queue)
    assert len(first) == slots and submitted_pending == [True] * slots
    with session_scope(engine) as session:  # the workers' part: every trial ends at once
        session.execute(
            update(Trial)
            .where(Trial.id.in_(first))
            .values(status=TrialState.COMPLETED, score=0.5, started_at=now(), finished_at=now())
        )
    executor.queue.clear()

    def count(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        table = re.search(r"\b(?:FROM|INTO)\s+(\w+)", statement)
        if counting and table and table.group(1) == "trials":
            statements.append(statement.split(None, 1)[0])

    event.listen(engine, "before_cursor_execute", count)
    counting = True
    driver.handle_all([Event(EventKind.TRIAL_FINISHED, trial_id) for trial_id in first])
    driver.step()
    counting = False
    assert Counter(statements) == {"SELECT": 1, "INSERT": 1}
    assert len(executor.queue) == slots and submitted_pending == [True] * (2 * slots)
    numbers = sorted(t.number for t in trials(engine, job_id))
    assert numbers == list(range(2 * slots))  # each number once, none lost to the batch


def test_a_pass_whose_insert_fails_submits_nothing_and_the_rescan_starts_its_trials_once(
    engine: Engine, settings: Settings
) -> None:
    """A store error while storing a pass's trials (a lost connection) leaves neither a trial submitted
    that is not stored nor a number skipped: the jobs of the pass are taken up again from their rows."""
    settings = Settings.from_env(environ={}, home=settings.home, cpu_slots=4)
    executor = InstantExecutor()
    executor.slots = 4
    clock = VirtualClock()
    driver = JobDriver(engine, executor, LocalEventChannel(), settings, clock=clock)
    job_id = make_job(engine, None, {"MODEL_TRIAL_COUNT": 6})
    failures = 1

    def fail_insert(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        nonlocal failures
        if failures and statement.startswith("INSERT INTO trials"):
            failures -= 1
            raise OperationalError(statement, None, ConnectionError("the server closed the connection"))

    event.listen(engine, "before_cursor_execute", fail_insert)
    driver.step()  # takes the job up; storing its first pass fails
    assert executor.queue == [] and trials(engine, job_id) == [] and job_id not in driver.jobs
    assert job_row(engine, job_id).status is JobStatus.RUNNING  # a store error ends no job
    clock.advance(clock() + driver.rescan_s)
    driver.step()
    started = trials(engine, job_id)
    assert sorted(executor.queue) == sorted(t.id for t in started)
    assert sorted(t.number for t in started) == [0, 1, 2, 3]


# -- several drivers: leases -----------------------------------------------------------------------


def test_two_drivers_with_leases_drive_each_job_once(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    a = StandInExecutor(engine, events, slots=2, duration=0.02)
    b = StandInExecutor(engine, events, slots=2, duration=0.02)
    with (
        running(engine, a, events, settings, lease_s=5.0, name="a"),
        running(engine, b, events, settings, lease_s=5.0, name="b"),
    ):
        jobs = [make_job(engine, events, {"MODEL_TRIAL_COUNT": 5}) for _ in range(4)]
        for job_id in jobs:
            assert wait_finished(engine, job_id).status is JobStatus.COMPLETED
    for job_id in jobs:
        rows = trials(engine, job_id)
        assert sorted(t.number for t in rows) == list(range(5))  # each proposed once, by one driver
        driver = job_row(engine, job_id).driver
        ids = {t.id for t in rows}
        mine, theirs = (a, b) if driver == "a" else (b, a)
        assert ids <= set(mine.submitted) and not ids & set(theirs.submitted)


def test_a_lapsed_lease_is_taken_over_and_a_clean_stop_hands_jobs_over_at_once(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    clock = VirtualClock()
    job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 4})
    lapses = clock() + 1.0
    with session_scope(engine) as session:  # a driver that died holding it, its lease running out soon
        session.execute(
            update(TrainJob)
            .where(TrainJob.id == job_id)
            .values(driver="dead", lease_expires_at=datetime.fromtimestamp(lapses, UTC))
        )
    executor = StandInExecutor(engine, events, slots=2, hold=True, clock=clock)
    with turned(engine, executor, events, settings, lease_s=2.0, name="heir", rescan_s=0.2) as loop:
        clock.advance(lapses - 0.001)
        loop.turn()  # the first rescan finds the job, its lease not lapsed yet
        assert executor.submitted == [] and job_id not in loop.driver.jobs  # not before the lease lapses
        clock.advance(lapses + 0.2)  # the next rescan is due, the lease lapsed
        loop.until(lambda: len(executor.held(job_id)) == 2, "the heir to take the job up")
        assert job_row(engine, job_id).driver == "heir" and job_id in loop.driver.jobs
    # The heir stopped cleanly: the job is free for the next driver at once.
    row = job_row(engine, job_id)
    assert row.driver is None and row.lease_expires_at is None and row.status is JobStatus.RUNNING


def test_a_driver_that_lost_its_lease_lets_the_job_go(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    clock = VirtualClock()
    executor = StandInExecutor(engine, events, slots=2, hold=True, clock=clock)
    with turned(engine, executor, events, settings, lease_s=0.6, name="slow") as loop:
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 4})
        loop.until(lambda: job_id in loop.driver.jobs, "the job to be taken up")
        with session_scope(engine) as session:  # another advisor took it after our lease lapsed
            session.execute(update(TrainJob).where(TrainJob.id == job_id).values(driver="other"))
        clock.advance(clock() + 0.2)  # the next renewal, a third of the lease later
        loop.turn()
        assert job_id not in loop.driver.jobs  # let go at that renewal
        assert job_row(engine, job_id).driver == "other"


def test_drivers_share_the_jobs_a_joining_one_gets_its_share_and_a_dead_ones_move_within_the_lease(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    clock = VirtualClock()
    lease_s = 3.0
    a = StandInExecutor(engine, events, slots=2, hold=True, clock=clock)
    b = StandInExecutor(engine, events, slots=2, hold=True, clock=clock)
    jobs = [make_job(engine, events, {"MODEL_TRIAL_COUNT": 4}) for _ in range(4)]
    with turned(engine, a, events, settings, lease_s=lease_s, name="a", rescan_s=0.5) as first:
        first.until(lambda: len(first.driver.jobs) == 4, "the only driver to take every job")
        with turned(engine, b, events, settings, lease_s=lease_s, name="b", rescan_s=0.5) as second:
            second.turn()  # it says it is alive; every job is held
            assert not second.driver.jobs
            clock.advance(clock() + lease_s / 3)  # the first driver's next renewal: two drivers share 4 jobs now
            first.turn()
            assert sorted(first.driver.jobs) == jobs[:2]  # it kept the oldest and handed the newest over
            clock.advance(clock() + 0.5)  # the second driver's next rescan
            second.turn()
            assert sorted(second.driver.jobs) == jobs[2:]
            assert [job_row(engine, job_id).driver for job_id in jobs] == ["a", "a", "b", "b"]
            assert {t.id for t in trials(engine, jobs[3])} <= set(b.submitted)
            # The second driver dies without a word: its jobs move once its lease and its liveness run out.
            for _ in range(4):
                clock.advance(clock() + lease_s / 3)
                first.turn()
            assert sorted(first.driver.jobs) == jobs
            assert [job_row(engine, job_id).driver for job_id in jobs] == ["a"] * 4


def test_a_user_stop_of_one_trial_reaches_the_executor_and_its_score_counts(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=2, hold=True)
    with running(engine, executor, events, settings):
        job_id = make_job(engine, events, {"MODEL_TRIAL_COUNT": 2})
        wait_until(lambda: len(executor.held(job_id)) == 2, what="two trials running")
        target, other = executor.held(job_id)
        events.publish(Event(EventKind.TRIAL_STOP_REQUESTED, target))  # what POST /trials/<id>/stop publishes
        wait_until(lambda: any(t == target for t, _, _ in executor.stop_requests), what="the stop request")
        assert [(t, reason) for t, reason, _ in executor.stop_requests] == [(target, "stopped by a user")]
        executor.release(other)
        job = wait_finished(engine, job_id)
    assert job.status is JobStatus.COMPLETED
    stopped = next(t for t in trials(engine, job_id) if t.id == target)
    assert stopped.status is TrialState.STOPPED and stopped.score is not None
