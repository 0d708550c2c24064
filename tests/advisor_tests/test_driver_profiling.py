"""Fusion profiling under fusion "auto" pays for itself: the real job driver on a real store, against a
simulated cluster on a virtual clock whose trials answer the driver's profile requests.

What the tests look at is what the store holds afterwards: which trials were asked to measure,
what they measured, how long every trial ran (virtual seconds), and the decision the driver
stored on the job. No wall-clock time is asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from baobab import Settings
from baobab.admin._train_job_json import train_job_json
from baobab.advisor import JobDriver
from baobab.advisor._scheduling import MIN_PROFILE_S, PROFILE_SHARE
from baobab.model import FloatKnob, IntegerKnob, KnobConfig, knob_config_to_json
from baobab.store import (
    Event,
    EventKind,
    LocalEventChannel,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    create_engine_from_url,
    finish_trial,
    session_scope,
    upgrade_database,
)
from baobab.testing import SimulatedCluster, SimulatedWork, VirtualClock, add_simulated_jobs, run_simulation
from baobab.testing._simulated import _Run, _utc

#: A width that shapes the model (a structure per value) and a value a stack keeps per member.
WIDE: KnobConfig = {"width": IntegerKnob(1, 1000), "x": FloatKnob(0.0, 1.0)}


class ProfilingCluster(SimulatedCluster):
    """A simulated cluster whose trials, when asked, report a fusion profile that took all the seconds the
    driver granted, and chose ``best`` (1: the fused size trained slower than one trial alone)."""

    def __init__(self, *args: Any, best: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.best = best

    def _finish(self, run: _Run, state: TrialState, score: float, at: float) -> None:
        with session_scope(self.engine) as session:
            request = session.scalar(select(Trial.fusion_profile).where(Trial.id == run.trial_id))
        profile = None
        if request is not None:
            seconds = float(request["budget_s"])
            rates = {"1": 100.0, "2": 150.0 if self.best == 2 else 60.0}
            profile = {**request, "samples_per_s": rates, "best": self.best, "seconds": seconds, "reason": None}
        stored = finish_trial(
            self.engine, run.trial_id, run.attempt, state, now=_utc(at), score=score, fusion_profile=profile
        )
        self._release(run.trial_id, stored or state, at)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    upgrade_database(db_url)
    engine = create_engine_from_url(db_url)
    yield engine
    engine.dispose()


def run_jobs(
    engine: Engine, tmp_path: Path, *, best: int, jobs: int = 1, trials: int = 60, gpus: int = 0, template: int | None
) -> tuple[list[int], int]:
    """``jobs`` fusion "auto" jobs of ``trials`` trials on 2 slots, on the WIDE template ``template`` (a new
    one when None), run to their end; their ids and the template's id."""
    events, clock = LocalEventChannel(), VirtualClock()
    work = SimulatedWork(median_s=60.0, spread=0.5, score=lambda knobs: float(knobs["x"]))
    cluster = ProfilingCluster(engine, events, clock, slots=2, work=work, best=best)
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=2)
    driver = JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600)
    ids = add_simulated_jobs(engine, None, jobs=jobs, trials=trials, gpus=gpus, options={"fusion": "auto"})
    with session_scope(engine) as session:
        subs = list(session.scalars(select(SubJob).where(SubJob.train_job_id.in_(ids))))
        if template is None:
            template = subs[0].model_template_id
            session.get(ModelTemplate, template).knob_config = knob_config_to_json(WIDE)
        for sub in subs:
            sub.model_template_id = template
    for job_id in ids:
        events.publish(Event(EventKind.JOB_CREATED, job_id))
    run_simulation(driver, cluster, max_virtual_s=7 * 24 * 3600)
    assert not driver.jobs
    return ids, template


def job_trials(engine: Engine, job_id: int) -> list[Trial]:
    with session_scope(engine) as session:
        return list(
            session.scalars(select(Trial).join(Trial.sub_job).where(SubJob.train_job_id == job_id).order_by(Trial.id))
        )


def group_size(rows: list[Trial], row: Trial) -> int:
    return 1 if row.fused_group is None else sum(r.fused_group == row.fused_group for r in rows)


def test_profiling_stays_under_its_share_of_the_time_the_trials_ran(engine: Engine, tmp_path: Path) -> None:
    # Every profile says fusing pays, so only the bound on time keeps profiles from every new structure.
    (job_id,), _ = run_jobs(engine, tmp_path, best=2, trials=80, template=None)
    rows = job_trials(engine, job_id)
    assert all(row.status is TrialState.COMPLETED for row in rows) and len(rows) == 80
    profiled = [row.fusion_profile["seconds"] for row in rows if row.fusion_profile is not None]
    trial_s = sum((row.finished_at - row.started_at).total_seconds() / group_size(rows, row) for row in rows)
    assert len(profiled) >= 2  # the bound let several through: it bounds, it does not forbid
    assert all(seconds >= MIN_PROFILE_S for seconds in profiled)
    assert sum(profiled) <= PROFILE_SHARE * trial_s
    structures = {json.dumps(row.knobs["width"]) for row in rows}
    assert len(profiled) < len(structures)  # most structures were never measured: they borrow a neighbour's size


def test_a_template_measured_slower_fused_is_not_profiled_again_on_that_device_kind(
    engine: Engine, tmp_path: Path
) -> None:
    (first,), template = run_jobs(engine, tmp_path, best=1, template=None)
    measured = [row for row in job_trials(engine, first) if row.fusion_profile is not None]
    assert len(measured) == 1  # slower fused once: the job's other structures were not measured
    with session_scope(engine) as session:
        shown = train_job_json(session.get(TrainJob, first), session)
    (decision,) = shown["fusion_profiling"].values()
    assert decision["decision"] == "skip" and "1 in this job, 0 in earlier jobs" in decision["reason"]
    assert shown["placement"] is None  # the rules place trials: no planner outlook

    # A later job on the same template and device kind measures nothing, and says why.
    (second,), _ = run_jobs(engine, tmp_path, best=1, template=template)
    assert all(row.fusion_profile is None for row in job_trials(engine, second))
    with session_scope(engine) as session:
        shown = train_job_json(session.get(TrainJob, second), session)
    (decision,) = shown["fusion_profiling"].values()
    assert decision["decision"] == "skip" and "0 in this job, 1 in earlier jobs" in decision["reason"]
    assert "on cpu" in decision["reason"]

    # On GPUs the template has not been measured: a job there measures it.
    (third,), _ = run_jobs(engine, tmp_path, best=1, gpus=2, template=template)
    assert sum(row.fusion_profile is not None for row in job_trials(engine, third)) == 1


def test_fusion_off_measures_nothing_and_records_no_decision(engine: Engine, tmp_path: Path) -> None:
    events, clock = LocalEventChannel(), VirtualClock()
    cluster = ProfilingCluster(engine, events, clock, slots=2, work=SimulatedWork(median_s=60.0), best=2)
    settings = Settings.from_env(environ={}, home=tmp_path, cpu_slots=2)
    driver = JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600)
    (job_id,) = add_simulated_jobs(engine, events, jobs=1, trials=20, gpus=0)
    run_simulation(driver, cluster, max_virtual_s=7 * 24 * 3600)
    assert all(row.fusion_profile is None and row.fused_group is None for row in job_trials(engine, job_id))
    with session_scope(engine) as session:
        assert session.get(TrainJob, job_id).placement is None
