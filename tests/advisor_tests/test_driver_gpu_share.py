"""Several of a GPU job's trials share its GPU under ``resources.gpu_share: "auto"``: the real job driver on a
real store, against a simulated cluster on a virtual clock with one GPU of fixed memory.

The simulated GPU: a trial started while ``n`` trials run (itself and those starting with it included) takes
``median_s * (1 + contention * (n - 1))`` virtual seconds, so ``contention`` says whether sharing pays
(0.25: four at once train 2.3x as fast as one after another; 1: no faster). It reports
``peak_mb`` of ``total_mb`` as a worker on a GPU does, and one started beside others whose
``real_mb`` together pass ``total_mb`` ends ERRORED with CUDA's out-of-memory message, as PyTorch's
does. What the tests look at is the store afterwards: how many trials ran at once, the
outcomes, and the decision the driver stored on the job. No wall-clock time is asserted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from test_driver import engine  # the real store, on both databases

from baobab import Settings
from baobab.admin._train_job_json import train_job_json
from baobab.advisor import JobDriver
from baobab.advisor._gpu_share import CONTEXT_MB, MAX_LEVEL, GpuShare
from baobab.store import (
    Event,
    EventKind,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    finish_trial,
    session_scope,
)
from baobab.testing import SimulatedCluster, SimulatedWork, VirtualClock, add_simulated_jobs, run_simulation
from baobab.testing._simulated import _Run, _utc

__all__ = ["engine"]  # the driver tests' fixture, imported for pytest

OOM = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.00 GiB total capacity)"


@dataclass
class Gpu:
    total_mb: int = 10_000
    peak_mb: int = 100  # what a trial reports
    real_mb: int = 100  # what a trial takes beside others
    contention: float = 0.25


class GpuWork(SimulatedWork):
    """Trials whose length depends on how many share the GPU when they start (see the module)."""

    def __init__(self, gpu: Gpu) -> None:
        super().__init__(median_s=60.0, spread=0.0, noise=0.0)
        self.gpu = gpu
        self.cluster: SharedGpuCluster | None = None

    def draw(self, trial_id: int, knobs: Mapping[str, Any]) -> tuple[float, float]:
        assert self.cluster is not None
        # Those that start with it (the waiting units the free slots take) share it too.
        cluster = self.cluster
        starting = min(len(cluster._waiting), cluster.slots - cluster.busy - 1)
        together = len(cluster.running) + 1 + starting
        self.cluster.running.add(trial_id)
        self.cluster.most_at_once = max(self.cluster.most_at_once, together)
        if together * self.gpu.real_mb > self.gpu.total_mb:
            self.cluster.oom.add(trial_id)
            return 1.0, 0.0
        return self.median_s * (1 + self.gpu.contention * (together - 1)), self.score(knobs)


class SharedGpuCluster(SimulatedCluster):
    def __init__(self, *args: Any, gpu: Gpu, **kwargs: Any) -> None:
        work = GpuWork(gpu)
        super().__init__(*args, work=work, **kwargs)
        work.cluster = self
        self.gpu = gpu
        self.running: set[int] = set()
        self.oom: set[int] = set()
        self.most_at_once = 0

    def _finish(self, run: _Run, state: TrialState, score: float, at: float) -> None:
        self.running.discard(run.trial_id)
        memory = {"peak_mb": self.gpu.peak_mb, "total_mb": self.gpu.total_mb}
        scored: float | None = score
        error = None
        if run.trial_id in self.oom:
            self.oom.discard(run.trial_id)
            state, scored, error = TrialState.ERRORED, None, OOM
        stored = finish_trial(
            self.engine, run.trial_id, run.attempt, state, now=_utc(at), score=scored, error=error, gpu_memory=memory
        )
        self._release(run.trial_id, stored or state, at)


@dataclass
class Ran:
    job_id: int
    span_s: float
    most_at_once: int  # of its trials on the GPU


def run_job(engine: Engine, tmp_path: Path, gpu: Gpu, *, share: str = "auto", trials: int = 40, slots: int = 16) -> Ran:
    """One GPU_COUNT 1 job of ``trials`` trials on ``slots`` slots, run to its end."""
    events, clock = LocalEventChannel(), VirtualClock()
    cluster = SharedGpuCluster(engine, events, clock, slots=slots, gpu=gpu)
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=16)
    driver = JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600)
    options = {"resources": {"gpu_share": share}}
    (job_id,) = add_simulated_jobs(engine, None, jobs=1, trials=trials, gpus=1, options=options)
    events.publish(Event(EventKind.JOB_CREATED, job_id))
    report = run_simulation(driver, cluster, max_virtual_s=7 * 24 * 3600)
    assert not driver.jobs
    return Ran(job_id, report.span_s, cluster.most_at_once)


def job_rows(engine: Engine, job_id: int) -> tuple[TrainJob, list[Trial]]:
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
        trials = list(
            session.scalars(select(Trial).join(Trial.sub_job).where(SubJob.train_job_id == job_id).order_by(Trial.id))
        )
        session.expunge_all()
    return job, trials


def shown(engine: Engine, job_id: int) -> dict[str, Any]:
    """The job's gpu_share as its API JSON shows it."""
    with session_scope(engine) as session:
        job = session.get(TrainJob, job_id)
        return train_job_json(job, session)["gpu_share"]


def test_trials_share_the_gpu_while_together_they_train_faster(engine: Engine, tmp_path: Path) -> None:
    plain = run_job(engine, tmp_path, Gpu(), share="off")
    assert plain.most_at_once == 1  # GPU_COUNT 1, no sharing: one at a time
    assert shown(engine, plain.job_id) is None

    shared = run_job(engine, tmp_path, Gpu())
    _, trials = job_rows(engine, shared.job_id)
    assert len(trials) == 40 and all(t.status is TrialState.COMPLETED for t in trials)
    assert shared.most_at_once == MAX_LEVEL  # 1, 2, 4, 8: each paid
    record = shown(engine, shared.job_id)
    assert record["level"] == MAX_LEVEL and record["settled"]
    assert [change["level"] for change in record["changes"]] == [2, 4, 8, 8]
    assert "is the most" in record["changes"][-1]["reason"]
    assert record["peak_mb"] == 100 + CONTEXT_MB and record["device_mb"] == 10_000
    assert shared.span_s < plain.span_s / 2  # the same 40 trials


def test_sharing_that_does_not_pay_goes_back_to_one_per_gpu(engine: Engine, tmp_path: Path) -> None:
    job_id = run_job(engine, tmp_path, Gpu(contention=1.0), trials=12).job_id
    record = shown(engine, job_id)
    assert record["level"] == 1 and record["settled"]
    assert [change["level"] for change in record["changes"]] == [2, 1]
    assert "below" in record["changes"][-1]["reason"]
    _, trials = job_rows(engine, job_id)
    assert all(t.status is TrialState.COMPLETED for t in trials)


def test_trials_an_executor_runs_one_after_another_gain_nothing_by_a_share(engine: Engine, tmp_path: Path) -> None:
    # One slot (a Celery GPU worker's single pool process): two trials a GPU wait for each other, as fast as one.
    ran = run_job(engine, tmp_path, Gpu(), trials=8, slots=1)
    record = shown(engine, ran.job_id)
    assert ran.most_at_once == 1
    assert record["level"] == 1 and record["settled"] and "1.00x" in record["changes"][-1]["reason"]


def test_the_measured_peak_bounds_the_share(engine: Engine, tmp_path: Path) -> None:
    # (1500 + a context) x 1.25 a trial: 2 fit in 90% of 10,000 MiB, 4 do not.
    ran = run_job(engine, tmp_path, Gpu(peak_mb=1500, real_mb=1500), trials=12)
    record = shown(engine, ran.job_id)
    assert record["level"] == 2 and record["settled"]
    assert "4 per GPU would need" in record["changes"][-1]["reason"]
    assert ran.most_at_once == 2


def test_a_trial_out_of_gpu_memory_beside_others_runs_again_alone_and_is_no_error(
    engine: Engine, tmp_path: Path
) -> None:
    # Trials report a small peak, so the share grows; past 3 at once they run out of memory.
    job_id = run_job(engine, tmp_path, Gpu(peak_mb=100, real_mb=3000), trials=16).job_id
    job, trials = job_rows(engine, job_id)
    assert job.status.value == "COMPLETED"
    assert all(t.status is TrialState.COMPLETED for t in trials)  # none counted as an error
    record = shown(engine, job_id)
    retried = record["retried_alone"]
    assert retried and record["settled"] and record["level"] == 2  # 4 ran out: one level down for good
    assert "ran out of GPU memory at 4 per GPU" in record["changes"][-1]["reason"]
    by_id = {t.id: t for t in trials}
    for trial_id in retried:
        alone = by_id[trial_id]
        assert alone.attempts == 2 and alone.error is None
        overlapping = [
            t.id
            for t in trials
            if t.id != trial_id and t.started_at < alone.finished_at and t.finished_at > alone.started_at
        ]
        assert overlapping == []  # it ran alone


def test_a_cpu_job_and_the_default_leave_the_share_alone() -> None:
    share = GpuShare(gpus=2)
    assert share.cap == 2  # GPU_COUNT trials at once until a measurement says more
    # No GPU memory reported (the trial ran on no GPU): nothing to judge a share by, so none is tried.
    assert share.finished(0, (0.0, 60.0), None, completed=True)
    assert share.level == 1 and share.settled and "no GPU memory reported" in share.changes[-1]["reason"]


def test_a_trial_of_an_earlier_level_is_not_measured_at_the_new_one() -> None:
    share = GpuShare(gpus=1)
    memory = {"peak_mb": 100, "total_mb": 80_000}
    first, second = share.started(), share.started()
    assert share.finished(first, (0.0, 60.0), memory, completed=True) and share.level == 2
    assert not share.finished(second, (0.0, 600.0), memory, completed=True)  # started at level 1: not a sample of 2
    assert share.runs == {1: [(0.0, 60.0)]}
    assert not share.finished(share.started(), (600.0, 601.0), memory, completed=False)  # a failed run is no sample
    assert share.runs == {1: [(0.0, 60.0)]}


def test_a_job_taken_up_again_keeps_its_level_and_measures_on_from_it() -> None:
    before = GpuShare(gpus=1)
    memory = {"peak_mb": 100, "total_mb": 80_000}
    assert before.finished(before.started(), (0.0, 60.0), memory, completed=True) and before.level == 2
    after = GpuShare.from_record(1, before.record)  # another driver: the record, not the runs
    assert (after.level, after.settled, after.peak_mb, after.device_mb) == (2, False, 100 + CONTEXT_MB, 80_000)
    epoch = after.started()
    assert not after.finished(epoch, (100.0, 170.0), memory, completed=True)
    assert after.finished(epoch, (100.0, 170.0), memory, completed=True)  # 2 at 2, nothing at 1 to compare: on up
    assert after.level == 4 and after.changes[-1] == {"level": 4, "reason": "2 per GPU measured"}
