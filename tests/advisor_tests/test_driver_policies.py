"""The job driver's policies and early stopping, on a real store (both databases) with the stand-in executor.

What each test looks at is what the template would receive: the trial rows the driver
wrote (knobs, policies, phase, the parameters a trial starts from) and what the
executor was asked (stop requests).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, update
from test_driver import (  # the stand-in executor and store helpers of the driver tests
    CONFIG,
    StandInExecutor,
    engine,
    events,
    finished,
    job_row,
    make_job,
    running,
    score_of,
    settings,
    trials,
    turned,
    wait_finished,
)

from baobab import Settings
from baobab.advisor import TrialRecord, TrialStatus, make_strategy
from baobab.model import ArchKnob, FloatKnob, KnobConfig, PolicyKnob
from baobab.store import Event, EventKind, InterimMetric, LocalEventChannel, TrainJob, TrialState, session_scope
from baobab.testing import VirtualClock, wait_until

__all__ = ["engine", "events", "settings"]  # fixtures, imported for pytest

SHARING: KnobConfig = {"x": FloatKnob(0.0, 1.0), "share": PolicyKnob("SHARE_PARAMS")}
SMALL: KnobConfig = {"x": FloatKnob(0.0, 1.0), "small": PolicyKnob("DOWNSCALE"), "early": PolicyKnob("EARLY_STOP")}


def job_with(
    engine: Engine, events: LocalEventChannel, budget: dict[str, Any], options: dict[str, Any], **kw: Any
) -> int:
    job_id = make_job(engine, None, budget, **kw)
    with session_scope(engine) as session:
        session.execute(update(TrainJob).where(TrainJob.id == job_id).values(options=options))
    events.publish(Event(EventKind.JOB_CREATED, job_id))
    return job_id


def test_early_stop_search_then_the_best_configuration_retrained_in_full(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=2, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = job_with(
            engine, events, {"MODEL_TRIAL_COUNT": 6}, {"policies": {"EARLY_STOP": True, "DOWNSCALE": True}},
            configs=(SMALL,),
        )  # fmt: skip
        assert wait_finished(engine, job_id).status.value == "COMPLETED"
    rows = trials(engine, job_id)
    search, final = rows[:-1], rows[-1]
    assert [t.phase for t in search] == ["search"] * 5 and final.phase == "final"
    assert all(t.policies == {"DOWNSCALE": True, "EARLY_STOP": True} and not t.servable for t in search)
    assert all(t.knobs["small"] and t.knobs["early"] for t in search)
    assert final.policies == {"DOWNSCALE": False, "EARLY_STOP": False} and final.servable
    assert not final.knobs["small"] and not final.knobs["early"]
    best = max(search, key=lambda t: t.score)
    assert final.knobs["x"] == best.knobs["x"]  # the best search configuration, retrained
    assert final.started_at >= max(t.finished_at for t in search)  # after every search trial ended


def test_a_short_time_budget_still_ends_with_a_full_length_final_trial(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    # On the driver's virtual clock (a busy machine cannot stretch a budget of seconds): trials of 3 s in 36 s.
    clock = VirtualClock()
    executor = StandInExecutor(engine, events, slots=2, hold=True, clock=clock)
    with turned(engine, executor, events, settings, grace_s=0.2) as loop:
        job_id = job_with(engine, events, {"TIME_HOURS": 0.01}, {"policies": {"EARLY_STOP": True, "final_factor": 1.0}})
        while (job := finished(engine, job_id)) is None:
            held = loop.until(lambda: executor.held(job_id) or finished(engine, job_id), "a trial or the job's end")
            if isinstance(held, list):
                clock.advance(clock() + 3.0)
                for trial_id in held:
                    executor.release(trial_id)
    rows = trials(engine, job_id)
    finals = [t for t in rows if t.phase == "final"]
    assert job.status.value == "COMPLETED", job.error
    assert len(finals) == 1 and finals[0].status is TrialState.COMPLETED  # not stopped, not cancelled
    assert finals[0].id not in {trial_id for trial_id, _, _ in executor.stop_requests + executor.cancels}
    assert not finals[0].knobs["early"]
    searched = [t for t in rows if t.phase == "search" and t.score is not None]
    assert finals[0].knobs["x"] == max(searched, key=lambda t: t.score).knobs["x"]


def test_share_params_hands_each_trial_the_latest_parameters_of_its_sub_job(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=1, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = job_with(
            engine, events, {"MODEL_TRIAL_COUNT": 3}, {"policies": {"SHARE_PARAMS": True}}, configs=(SHARING,)
        )
        wait_finished(engine, job_id)
    first, second, third = trials(engine, job_id)
    assert first.shared_params_path is None
    assert second.shared_params_path == first.params_path and third.shared_params_path == second.params_path
    assert all(t.policies == {"SHARE_PARAMS": True} and t.knobs["share"] and t.servable for t in (first, second, third))


def test_share_params_best_hands_on_the_best_scored_parameters(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=1, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = job_with(
            engine, events, {"MODEL_TRIAL_COUNT": 5}, {"policies": {"SHARE_PARAMS": "best"}}, configs=(SHARING,)
        )
        wait_finished(engine, job_id)
    rows = trials(engine, job_id)
    for i, trial in enumerate(rows[1:], start=1):
        best = max(rows[:i], key=lambda t: (t.score, -t.id))
        assert trial.shared_params_path == best.params_path


def test_share_params_hands_an_evolution_child_its_parents_parameters(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    """The strategy names the trial a proposal mutates; that trial's parameters, not the latest, start it."""
    config: KnobConfig = {**SHARING, "arch": ArchKnob([["a", "b", "c"]] * 3)}
    searched = ("x", "arch")
    executor = StandInExecutor(engine, events, slots=1, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = job_with(
            engine, events, {"MODEL_TRIAL_COUNT": 24}, {"policies": {"SHARE_PARAMS": True}},
            configs=(config,), strategies=("evolution",), seeds=(3,),
        )  # fmt: skip
        assert wait_finished(engine, job_id).status.value == "COMPLETED"
    rows = trials(engine, job_id)
    by_number = {t.number: t for t in rows}
    strategy = make_strategy("evolution", {k: config[k] for k in searched}, seed=3)
    children = 0
    for trial in rows:  # one slot: every earlier trial had finished when this one was proposed
        knobs = {k: trial.knobs[k] for k in searched}
        parent = strategy.parent(trial.number)
        assert strategy.propose(trial.number) == knobs
        if parent is not None:
            children += 1
            assert trial.shared_params_path == by_number[parent].params_path
            mother = by_number[parent].knobs
            changed = (knobs["x"] != mother["x"]) + sum(
                a != b for a, b in zip(knobs["arch"], mother["arch"], strict=True)
            )
            assert changed == 1
        strategy.observe(TrialRecord(trial.number, knobs, TrialStatus.COMPLETED, trial.score))
    assert children >= 10  # the population (10) fills, then every proposal is a child


def report(engine: Engine, trial_id: int, step: int, value: float) -> None:
    with session_scope(engine) as session:
        session.execute(
            insert(InterimMetric),
            [{"trial_id": trial_id, "step": step, "metrics": {"val_score": value}, "time": datetime.now(UTC)}],
        )


def release_all(executor: StandInExecutor, engine: Engine, job_id: int) -> None:
    """Let every held trial of the job complete, including those started meanwhile, until the job ends."""

    def finished() -> bool:
        for trial_id in executor.held(job_id):
            executor.release(trial_id)
        return job_row(engine, job_id).status.is_finished()

    wait_until(finished, what=f"job {job_id} to finish")


def test_asha_stops_the_weaker_trial_at_a_rung_through_the_executor(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=2, hold=True)
    with running(engine, executor, events, settings, metrics_s=0.05):
        job_id = job_with(engine, events, {"MODEL_TRIAL_COUNT": 2}, {"early_stopping": {"rule": "asha", "eta": 2}})
        strong, weak = wait_until(lambda: len(held := executor.held(job_id)) == 2 and held, what="two running trials")
        report(engine, strong, 1, 0.9)
        report(engine, weak, 1, 0.1)
        stop = wait_until(lambda: executor.stop_requests, what="a stop request")
        assert [(trial_id, "early stopping" in reason) for trial_id, reason, _ in stop] == [(weak, True)]
        release_all(executor, engine, job_id)
    rows = {t.id: t for t in trials(engine, job_id)}
    assert rows[weak].status is TrialState.STOPPED and rows[strong].status is TrialState.COMPLETED
    assert rows[strong].score == score_of(rows[strong].knobs)


def test_asha_rule_is_rebuilt_from_stored_metrics_after_a_restart(
    engine: Engine, events: LocalEventChannel, settings: Settings
) -> None:
    executor = StandInExecutor(engine, events, slots=2, hold=True)
    with running(engine, executor, events, settings, metrics_s=0.05):
        job_id = job_with(engine, events, {"MODEL_TRIAL_COUNT": 3}, {"early_stopping": {"rule": "asha", "eta": 2}})
        strong, other = wait_until(lambda: len(held := executor.held(job_id)) == 2 and held, what="two running trials")
        report(engine, strong, 1, 0.9)
        executor.kill()
    # A new driver and executor: the lost trials run again; the rule already knows the strong trial's report.
    executor = StandInExecutor(engine, events, slots=2, hold=True)
    with running(engine, executor, events, settings, metrics_s=0.05) as driver:
        wait_until(lambda: len(executor.held(job_id)) == 2, what="the lost trials to run again")
        sub = next(iter(driver.jobs[job_id].sub_jobs.values()))
        assert sub.rule is not None and sub.rule.name == "asha"
        report(engine, other, 1, 0.2)
        stop = wait_until(lambda: executor.stop_requests, what="a stop request")
        assert [trial_id for trial_id, _, _ in stop] == [other]
        release_all(executor, engine, job_id)


def test_plain_jobs_are_unchanged(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    executor = StandInExecutor(engine, events, slots=2, duration=0.01)
    with running(engine, executor, events, settings):
        job_id = job_with(engine, events, {"MODEL_TRIAL_COUNT": 3}, {"lr": 0.1}, configs=(CONFIG,))
        wait_finished(engine, job_id)
    rows = trials(engine, job_id)
    assert all(t.phase is None and t.policies == {"EARLY_STOP": False} and t.servable for t in rows)
    assert all(t.shared_params_path is None for t in rows)


ENAS: KnobConfig = {
    "arch": ArchKnob([[0, 1, 2], [0, 1, 2]]),
    "share": PolicyKnob("SHARE_PARAMS"),
    "skip": PolicyKnob("SKIP_TRAIN"),
    "quick": PolicyKnob("QUICK_EVAL"),
    "small": PolicyKnob("DOWNSCALE"),
    "early": PolicyKnob("EARLY_STOP"),
}


def test_enas_runs_its_cycle_through_the_planner(engine: Engine, events: LocalEventChannel, settings: Settings) -> None:
    def outcome(number: int, knobs: dict[str, Any]) -> tuple[TrialState, float | None, str | None]:
        return TrialState.COMPLETED, 0.1 * sum(knobs["arch"]) + 0.01 * number, None

    executor = StandInExecutor(engine, events, slots=2, duration=0.01, outcome=outcome)
    with running(engine, executor, events, settings):
        job_id = job_with(engine, events, {"MODEL_TRIAL_COUNT": 10}, {}, configs=(ENAS,), strategies=("enas",))
        assert wait_finished(engine, job_id).status.value == "COMPLETED"
    rows = trials(engine, job_id)
    phases = [t.phase for t in rows]
    assert phases[0] == "train_shared" and phases[-1] == "final_train"
    assert phases.count("final_evaluate") == 3 and "evaluate" in phases
    final = rows[-1]
    assert final.servable and not any(final.policies.values()) and final.shared_params_path is None
    assert all(not t.servable for t in rows[:-1])
    shared = [t for t in rows if t.phase == "train_shared"]
    for trial in rows:
        if trial.phase in ("evaluate", "final_evaluate"):
            assert trial.policies["SKIP_TRAIN"] and trial.policies["SHARE_PARAMS"]
            earlier = [s for s in shared if s.finished_at <= trial.started_at]
            assert trial.shared_params_path in {s.params_path for s in earlier}
    finals = [t for t in rows if t.phase == "final_evaluate"]
    best = max(finals, key=lambda t: (t.score, -t.number))
    assert final.knobs["arch"] == best.knobs["arch"]
    assert final.started_at >= max(t.finished_at for t in finals)
