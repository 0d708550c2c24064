"""The trials of a dev run: each in a child process, its events echoed, its outcome recorded.

See :mod:`baobab.dev._runner` for the run as a whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baobab.advisor import Strategy, TrialRecord, TrialStatus
from baobab.exceptions import StrategyError
from baobab.model import InterimMetric, KnobConfig, Knobs, validate_knobs
from baobab.worker import ChildOutcome, TrialSpec, run_child, trial_seed

__all__ = ["DevTrial", "TrialRunner", "format_knobs", "indent", "search"]


@dataclass(frozen=True)
class DevTrial:
    """One finished trial of a dev run.

    ``knobs`` holds every knob value the template got; ``proposal`` the part the
    strategy chose. ``predictions`` are the trained model's, on the run's queries.
    """

    trial_id: int
    knobs: Knobs
    proposal: Knobs
    status: TrialStatus
    score: float | None
    duration_s: float
    error: str | None = None
    params_path: Path | None = None
    predictions: list[Any] | None = None
    metrics: tuple[InterimMetric, ...] = ()
    logs: tuple[str, ...] = ()


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def format_knobs(knobs: Knobs) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in knobs.items())


@dataclass
class TrialRunner:
    """Runs the trials of one dev run, with what they share: template, datasets, limits, output."""

    template: Path
    class_name: str
    config: KnobConfig
    fixed: Knobs
    train_path: str
    val_path: str
    train_args: dict[str, Any]
    queries: list[Any]
    seed: int
    run_dir: Path
    trial_timeout: float | None
    budget_end: float | None
    grace_s: float
    echo: Callable[[str], None]

    def deadline(self, started: float) -> tuple[float | None, str]:
        """When a trial started at ``started`` is killed, and how to say it."""
        candidates = []
        if self.trial_timeout is not None:
            candidates.append((started + self.trial_timeout, f"timed out after {self.trial_timeout:g} s; killed"))
        if self.budget_end is not None:
            reason = f"still running {self.grace_s:g} s after the time budget ended; killed"
            candidates.append((self.budget_end + self.grace_s, reason))
        return min(candidates) if candidates else (None, "")

    def on_event(
        self, trial_id: int, metrics: list[InterimMetric], logs: list[str]
    ) -> Callable[[dict[str, Any]], None]:
        def handle(event: dict[str, Any]) -> None:
            if event["event"] == "metric":
                metrics.append(InterimMetric(event["step"], event["metrics"]))
                values = ", ".join(f"{k}={v:.4g}" for k, v in event["metrics"].items())
                self.echo(f"  trial {trial_id} step {event['step']}: {values}")
            elif event["event"] == "log":
                logs.append(event["message"])
                self.echo(f"  trial {trial_id}: {event['message']}")

        return handle

    def trial(self, trial_id: int, proposal: Knobs) -> DevTrial:
        knobs = validate_knobs(self.config, {**proposal, **self.fixed})
        self.echo(f"trial {trial_id}: {format_knobs(proposal) or 'no searched knobs'}")
        name = f"trial-{trial_id:03d}"
        spec = TrialSpec(
            mode="trial",
            template=str(self.template),
            class_name=self.class_name,
            knobs=knobs,
            queries=self.queries,
            params_path=str(self.run_dir / f"{name}.params"),
            seed=trial_seed(self.seed, trial_id),
            train_path=self.train_path,
            val_path=self.val_path,
            train_args=self.train_args,
        )
        metrics: list[InterimMetric] = []
        logs: list[str] = []
        started = time.monotonic()
        deadline, timeout_reason = self.deadline(started)
        outcome = run_child(
            spec,
            self.run_dir / f"{name}.json",
            self.run_dir / f"{name}.log",
            deadline=deadline,
            stop_at=self.budget_end,
            on_event=self.on_event(trial_id, metrics, logs),
        )
        duration = time.monotonic() - started
        common: dict[str, Any] = dict(
            trial_id=trial_id,
            knobs=knobs,
            proposal=proposal,
            duration_s=duration,
            metrics=tuple(metrics),
            logs=tuple(logs),
        )
        if outcome.result is not None:
            score = float(outcome.result["score"])
            self.echo(f"trial {trial_id} COMPLETED: score {score:.6g} ({duration:.1f} s)")
            return DevTrial(
                **common,
                status=TrialStatus.COMPLETED,
                score=score,
                params_path=Path(spec.params_path),
                predictions=outcome.result["predictions"],
            )
        error = timeout_reason if outcome.timed_out else str(outcome.error)
        status = TrialStatus.INVALID if outcome.invalid else TrialStatus.FAILED
        self.echo(f"trial {trial_id} {status} ({duration:.1f} s):\n{indent(error)}")
        return DevTrial(**common, status=status, score=None, error=error)

    def reload(self, best: DevTrial) -> ChildOutcome:
        spec = TrialSpec(
            mode="reload",
            template=str(self.template),
            class_name=self.class_name,
            knobs=best.knobs,
            queries=self.queries,
            params_path=str(best.params_path),
            expected=best.predictions,
        )
        deadline = None if self.trial_timeout is None else time.monotonic() + self.trial_timeout
        return run_child(spec, self.run_dir / "reload.json", self.run_dir / "reload.log", deadline=deadline)


def search(run: TrialRunner, strategy: Strategy, trials: int | None) -> tuple[list[DevTrial], list[str]]:
    """Propose, run and observe trials until ``trials`` ran, the time budget ends or the strategy gives up.

    Returns:
        The trials, and notes on why the search ended early (if it did).
    """
    done: list[DevTrial] = []
    notes: list[str] = []
    while trials is None or len(done) < trials:
        if run.budget_end is not None and time.monotonic() >= run.budget_end:
            break
        trial_id = len(done) + 1
        try:
            proposal = strategy.propose(trial_id)
        except StrategyError as e:
            notes.append(f"the strategy stopped proposing after {len(done)} trials: {e}")
            run.echo(notes[-1])
            break
        trial = run.trial(trial_id, proposal)
        strategy.observe(TrialRecord(trial_id, proposal, trial.status, trial.score, {"duration_s": trial.duration_s}))
        done.append(trial)
    return done, notes
