"""The real job driver at scale, on PostgreSQL, against a simulated cluster on a virtual clock.

The reduced form of ``bench/scale.py``: 5,000 trials of 10 jobs on 100 slots (the
benchmark runs 100,000 of 100 jobs on 1,000), with early stopping on four of the jobs
and a time budget that ends two of them early, run by one driver and by two sharing the
jobs by leases (each scheduling pass of each storing its trials at once). It
asserts what does not depend on the machine's speed: every trial accounted for once,
in the store as in the cluster, every job ended as its budget says, and the slots kept
busy in virtual time while there was work to start. How fast the driver is, the
benchmark measures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from baobab import Settings
from baobab.advisor import JobDriver
from baobab.store import (
    InterimMetric,
    JobStatus,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)
from baobab.testing import SimulatedCluster, SimulatedWork, VirtualClock, add_simulated_jobs, run_simulation

SLOTS = 100
TRIALS = 500
MEDIAN_S = 60.0


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    yield engine
    engine.dispose()


@pytest.mark.parametrize("advisors", [1, 2])
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_five_thousand_trials_on_a_hundred_slots_are_each_run_once_and_keep_the_slots_busy(
    engine: Engine, tmp_path: Path, advisors: int
) -> None:
    events = LocalEventChannel()
    clock = VirtualClock()
    work = SimulatedWork(median_s=MEDIAN_S, steps=2)
    cluster = SimulatedCluster(engine, events, clock, slots=SLOTS, work=work)
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=2)
    shared = {} if advisors == 1 else {"lease_s": 30.0}
    drivers = [
        JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600, name=f"a{i}", **shared)
        for i in range(advisors)
    ]
    for driver in drivers:  # each says it is alive before any takes up jobs
        driver.renew_leases()
    # Each job may take 40 slots: 400 wanted of 100, so fairness, not caps, shares them out.
    plain = add_simulated_jobs(engine, events, jobs=4, trials=TRIALS, gpus=40)
    asha = add_simulated_jobs(
        engine, events, jobs=4, trials=TRIALS, gpus=40, options={"early_stopping": {"rule": "asha", "eta": 3}}
    )
    # 1,800 s on 10 to 20 slots (fair shares) against 500 trials of 60 s: cut off well before the end.
    timed = add_simulated_jobs(engine, events, jobs=2, trials=TRIALS, gpus=40, time_hours=0.5)

    first_holder: dict[int, str] = {}

    def note_holders(_: object) -> None:
        for driver in drivers:
            for job_id in driver.jobs:
                first_holder.setdefault(job_id, driver.name)

    report = run_simulation(drivers, cluster, max_virtual_s=30 * 24 * 3600, on_loop=note_holders)

    assert not any(driver.jobs for driver in drivers) and not cluster.active()
    with session_scope(engine) as session:
        jobs = {job.id: job for job in session.scalars(select(TrainJob))}
        rows = session.execute(select(Trial.id, Trial.status, SubJob.train_job_id).join(Trial.sub_job)).all()
        metrics = session.scalar(select(func.count()).select_from(InterimMetric))
    per_job = Counter(job_id for _, _, job_id in rows)

    # Every trial the driver created ran and ended once, and the cluster and the store agree on how.
    assert set(report.ended) == {trial_id for trial_id, _, _ in rows}
    assert set(report.ended.values()) == {1}
    assert report.outcomes == Counter(status for _, status, _ in rows)
    assert all(status.is_finished() for _, status, _ in rows)
    assert metrics and metrics <= 2 * len(rows)

    # Each job ended as its budget says: the trial count spent, or the time budget ended it early.
    assert all(job.status is JobStatus.COMPLETED for job in jobs.values()), {j.id: j.error for j in jobs.values()}
    assert all(per_job[job_id] == TRIALS for job_id in plain + asha)
    for job_id in timed:
        job = jobs[job_id]
        assert job.started_at is not None and job.finished_at is not None
        assert 0 < per_job[job_id] < TRIALS
        # Virtual time: the deadline came after 30 minutes, and the job ended within its grace period.
        assert 1800 <= (job.finished_at - job.started_at).total_seconds() <= 1800 + drivers[0].grace_s + 1
    stopped = Counter(job_id for _, status, job_id in rows if status is TrialState.STOPPED)
    assert all(stopped[job_id] > TRIALS / 3 for job_id in asha)  # ASHA (eta 3) stops most trials at a rung
    assert not any(stopped[job_id] for job_id in plain)

    # While work waited, every slot was busy: the driver refilled each one as it freed, in virtual time.
    assert report.trials == len(rows) >= 4500
    assert report.utilisation_while_waiting >= 0.98
    # Each driver took up its share of the jobs, five of the ten (later, as jobs end, the shares shrink
    # and one may hand another a job).
    assert Counter(first_holder.values()) == Counter({f"a{i}": 10 // advisors for i in range(advisors)})
