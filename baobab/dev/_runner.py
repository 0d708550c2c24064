"""The local dev runner behind ``baobab dev test-model``: a small search on this machine.

It does what the platform will do with a template, with no server: validate the
template, search its knobs with a strategy, run each trial in a child process (so a
crash, a segfault or an endless loop fails that trial and the search goes on), check
that dumped parameters reload into a fresh instance with the same predictions, and
report the trials and the best one. Queries for the reload checks come from
``queries`` or, by default, from the first rows of the validation dataset in the
format :mod:`baobab.worker._queries` documents.

Knob values per trial: the strategy's proposal for the searchable knobs, FixedKnob
values as declared, every policy knob False, and ``knobs`` overrides on top (an
overridden knob leaves the search).
"""

from __future__ import annotations

import math
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tabulate import tabulate

from baobab.advisor import TrialStatus, base_knobs, make_strategy
from baobab.dev._trials import DevTrial, TrialRunner, format_knobs, indent, search
from baobab.enums import DatasetFormat, Task
from baobab.exceptions import DatasetError, KnobConfigError
from baobab.model import KnobConfig, Knobs, check_template, load_template, searchable_knobs, validate_knobs
from baobab.worker import sample_queries

__all__ = ["DEFAULT_TRIALS", "DevRunResult", "DevTrial", "run_dev"]

#: Trials run when neither a trial count nor a time budget is given.
DEFAULT_TRIALS = 5
#: Default queries for the reload checks: this many validation examples.
_QUERY_COUNT = 5


@dataclass(frozen=True)
class DevRunResult:
    """The outcome of :func:`run_dev`; ``ok`` when a trial succeeded and its parameters reload.

    ``predictions`` are the reloaded best model's on ``queries``; ``reload_error`` says
    why the best trial's stored parameters did not reload; ``notes`` why the search
    ended before its budget (the strategy had nothing left to propose).
    """

    trials: tuple[DevTrial, ...]
    best: DevTrial | None
    seed: int
    run_dir: Path
    queries: list[Any]
    predictions: list[Any] | None = None
    reload_error: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.best is not None and self.reload_error is None


def _task(task: Task | str) -> Task:
    try:
        return Task(task)
    except ValueError:
        raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(Task)}") from None


def _check_overrides(config: KnobConfig, overrides: Mapping[str, Any]) -> Knobs:
    for name in overrides:
        if name not in config:
            raise KnobConfigError(f"is not a knob of the template; its knobs: {', '.join(config)}", knob=name)
    return validate_knobs({name: config[name] for name in overrides}, overrides)


def _with_target(task: Task, train_args: dict[str, Any], target: str | None) -> dict[str, Any]:
    """``train_args`` with the target column ``train()`` receives, as a train job's worker passes a job's target.

    Raises:
        ValueError: ``target`` for a task whose datasets have no target column, or given in both places.
    """
    if target is None:
        return train_args
    if task.dataset_format is not DatasetFormat.TABULAR:
        raise ValueError(f"target applies to tabular tasks only: a {task} template reads no target column")
    if "target" in train_args:
        raise ValueError("the target column is given as target and in train_args: give it once")
    return {**train_args, "target": target}


def _summary(error: str | None, width: int = 60) -> str:
    """The first line of an error (its summary), cut to ``width``."""
    line = (error or "").partition("\n")[0]
    return line if len(line) <= width else line[: width - 3] + "..."


def _table(trials: Sequence[DevTrial]) -> str:
    rows = [
        [t.trial_id, format_knobs(t.proposal), t.score, t.duration_s, t.status.value, _summary(t.error)] for t in trials
    ]
    headers = ["trial", "knobs", "score", "duration (s)", "status", "error"]
    return tabulate(rows, headers=headers, floatfmt=("", "", ".6g", ".1f", "", ""), missingval="")


def run_dev(
    template: str | Path,
    class_name: str,
    *,
    task: Task | str,
    train_path: str | Path,
    val_path: str | Path,
    trials: int | None = None,
    time_hours: float | None = None,
    advisor: str | None = None,
    knobs: Mapping[str, Any] | None = None,
    queries: Sequence[Any] | None = None,
    train_args: Mapping[str, Any] | None = None,
    target: str | None = None,
    seed: int | None = None,
    trial_timeout: float | None = None,
    run_dir: str | Path | None = None,
    grace_s: float = 30.0,
    echo: Callable[[str], None] = print,
) -> DevRunResult:
    """Search ``class_name`` of the template file ``template`` on this machine.

    Args:
        template, class_name: the template file and the class in it.
        task: what the template is for; decides the default queries' format.
        train_path, val_path: the datasets given to ``train()`` and ``evaluate()``.
        trials: how many trials to run (:data:`DEFAULT_TRIALS` when no budget is given).
        time_hours: a time budget instead: no trial starts after it; running ones are
            asked to stop (``TrialContext.should_stop``) and killed ``grace_s`` later.
        advisor: a strategy name (see ``baobab.advisor.STRATEGIES``); None picks one.
        knobs: knob values to use instead of searching those knobs.
        queries: the queries for the reload checks (and whose predictions are shown);
            by default the first validation examples.
        train_args: keyword arguments for ``train()``.
        target: a tabular task's target column, as a train job's ``target`` field: ``train()``
            receives it as its ``target`` argument, and the default queries leave it out (by
            default :data:`~baobab.store.DEFAULT_TARGET`, and ``train()`` keeps its own).
            ``train_args={"target": ...}`` says the same, as it did before this parameter.
        seed: makes the proposals, and the global random generators of each trial
            process, reproducible; None draws one (it is in the result).
        trial_timeout: seconds after which a trial is killed and FAILED.
        run_dir: where trial specs, logs and parameters go; a new temporary folder by default.
        echo: receives the progress, the trial table and the best trial, line by line.

    Raises:
        TemplateError: the template cannot be loaded or breaks the BaseModel contract.
        KnobConfigError: a ``knobs`` override names no knob or has a bad value.
        StrategyError: ``advisor`` is not a known strategy.
        DatasetError: a dataset is missing, or unreadable for the default queries.
        ValueError: an unknown task, both or bad budgets, empty queries, or a ``target`` given for an
            image task or given twice.
    """
    task = _task(task)
    train_args = _with_target(task, dict(train_args or {}), target)
    if trials is not None and time_hours is not None:
        raise ValueError("give a trial count or a time budget, not both")
    if trials is None and time_hours is None:
        trials = DEFAULT_TRIALS
    if trials is not None and trials < 1:
        raise ValueError(f"trials={trials} must be at least 1")
    if time_hours is not None and not (math.isfinite(time_hours) and time_hours > 0):
        raise ValueError(f"time_hours={time_hours} must be a positive number")
    for path in (train_path, val_path):
        if not Path(path).is_file():
            raise DatasetError("no such file", file=str(path))
    cls = load_template(template, class_name)
    config = check_template(cls)
    overrides = _check_overrides(config, knobs or {})
    show_predictions = queries is not None
    if queries is None:
        queries = sample_queries(task, str(val_path), count=_QUERY_COUNT, target=train_args.get("target"))
    elif not isinstance(queries, list) or not queries:
        raise ValueError("queries must be a non-empty list")
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    search_config = {name: knob for name, knob in config.items() if name not in overrides}
    strategy = make_strategy(advisor, search_config, seed=seed)
    run_dir = Path(tempfile.mkdtemp(prefix="baobab-dev-") if run_dir is None else run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    searched = ", ".join(searchable_knobs(search_config)) or "nothing"
    echo(f"{class_name} from {template}: searching {searched} with {strategy.name}, seed {seed}")
    echo(f"run folder: {run_dir}")
    run = TrialRunner(
        template=Path(template).resolve(),
        class_name=class_name,
        config=config,
        fixed={**base_knobs(config), **overrides},
        train_path=str(Path(train_path).resolve()),
        val_path=str(Path(val_path).resolve()),
        train_args=train_args,
        queries=list(queries),
        seed=seed,
        run_dir=run_dir,
        trial_timeout=trial_timeout,
        budget_end=None if time_hours is None else time.monotonic() + time_hours * 3600,
        grace_s=grace_s,
        echo=echo,
    )
    done, notes = search(run, strategy, trials)
    result = DevRunResult(
        trials=tuple(done), best=None, seed=seed, run_dir=run_dir, queries=run.queries, notes=tuple(notes)
    )
    echo("")
    echo(_table(done))
    completed = [t for t in done if t.status is TrialStatus.COMPLETED]
    if not completed:
        echo(f"no trial succeeded ({len(done)} failed)")
        return result
    best = max(completed, key=lambda t: t.score or 0.0)  # the first of equals; completed trials have a score
    echo(f"best: trial {best.trial_id}, score {best.score:.6g}, knobs {format_knobs(best.knobs)}")
    outcome = run.reload(best)
    if outcome.result is None:
        error = f"timed out after {trial_timeout:g} s; killed" if outcome.timed_out else str(outcome.error)
        echo(f"the best trial's stored parameters do not reload:\n{indent(error)}")
        return replace(result, best=best, reload_error=error)
    echo(f"the best trial's parameters ({best.params_path}) reload with the same predictions")
    predictions = outcome.result["predictions"]
    if show_predictions:
        for i, prediction in enumerate(predictions):
            echo(f"query {i}: {prediction!r}")
    return replace(result, best=best, predictions=predictions)
