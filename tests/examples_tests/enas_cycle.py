"""ENAS's whole cycle run in one process on an example template, for the examples' tests to check."""

from __future__ import annotations

from typing import Any

from baobab.advisor import EnasPlanner, EnasProgress, EnasStrategy, TrialRecord, TrialStatus, trial_knobs
from baobab.model import validate_knob_config

#: The cycle's trials: one shared training, four evaluations, three final evaluations, the final training.
PHASES = ["train_shared"] + ["evaluate"] * 4 + ["final_evaluate"] * 3 + ["final_train"]


def run_cycle(template: type, train: str, val: str) -> tuple[EnasStrategy, EnasPlanner, dict[int, tuple[str, float]]]:
    """Nine trials as the planner orders them, each trained on ``train`` and scored on ``val``, the shared
    weights handed on under SHARE_PARAMS; the strategy, the planner and each trial's (phase, score)."""
    config = validate_knob_config(template.get_knob_config())  # type: ignore[attr-defined]
    strategy = EnasStrategy(config, seed=0)
    planner = EnasPlanner(config, trial_budget=9, train_trials=1, evaluate_trials=4, top_k=3)
    started: dict[Any, int] = {}
    shared = None
    scores: dict[int, tuple[str, float]] = {}
    for trial_id in range(len(PHASES)):
        step = planner.next(EnasProgress(started=started, finished=started))
        assert step.phase is not None
        proposal = strategy.propose_for(step.phase, trial_id)
        model = template(**trial_knobs(config, proposal, step.policies))
        model.train(train, shared_params=shared if step.policies.get("SHARE_PARAMS") else None, seed=trial_id)
        scores[trial_id] = (step.phase.value, model.evaluate(val))
        if step.phase == "train_shared":
            shared = model.dump_parameters()
        started[step.phase] = started.get(step.phase, 0) + 1
        strategy.observe(
            TrialRecord(trial_id, proposal, TrialStatus.COMPLETED, scores[trial_id][1], {"phase": step.phase.value})
        )
    assert planner.next(EnasProgress(started=started, finished=started)).done
    return strategy, planner, scores
