"""``baobab dev test-model``: try a model template on this machine, with no server.

Imported only when the command is run or listed (the ``dev`` group is a
:class:`~baobab.cli._lazy.LazyGroup`): its options need :mod:`baobab.model`, which loads NumPy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from baobab.exceptions import BaobabError, KnobConfigError, StrategyError
from baobab.model import Task

__all__ = ["test_model"]


def _assignments(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """Parse NAME=VALUE options; VALUE is read as JSON when it is JSON (1e-3, true, [1, 2]), else as text."""
    parsed: dict[str, Any] = {}
    for text in values:
        name, sep, raw = text.partition("=")
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE", ctx=ctx, param=param)
        if name in parsed:
            raise click.BadParameter(f"{name!r} is given twice", ctx=ctx, param=param)
        try:
            parsed[name] = json.loads(raw)
        except ValueError:
            parsed[name] = raw
    return parsed


def _queries(ctx: click.Context, param: click.Parameter, path: Path | None) -> list[Any] | None:
    if path is None:
        return None
    try:
        queries = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"{path}: not a JSON file: {e}", ctx=ctx, param=param) from None
    if not isinstance(queries, list) or not queries:
        raise click.BadParameter(f"{path}: must hold a non-empty JSON list of queries", ctx=ctx, param=param)
    return queries


_existing_file = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("test-model")
@click.argument("file", type=_existing_file)
@click.option("--class", "class_name", required=True, help="The template class in FILE.")
@click.option("--task", required=True, type=click.Choice([t.value for t in Task], case_sensitive=False))
@click.option("--train", "train_path", required=True, type=_existing_file, help="Training dataset.")
@click.option("--val", "val_path", required=True, type=_existing_file, help="Validation dataset.")
@click.option("--trials", type=click.IntRange(min=1), help="Number of trials [default: 5].")
@click.option("--time-hours", type=click.FloatRange(min=0, min_open=True), help="Time budget instead of --trials.")
@click.option(
    "--advisor", default="auto", show_default=True, help="Search strategy: auto, random, bayes, tpe, evolution."
)
@click.option(
    "--knob", "knobs", multiple=True, callback=_assignments, metavar="NAME=VALUE", help="Fix a knob (not searched)."
)
@click.option(
    "--queries",
    type=_existing_file,
    callback=_queries,
    help="JSON list of queries to check reloading with and to print the best model's predictions for.",
)
@click.option(
    "--train-arg", "train_args", multiple=True, callback=_assignments, metavar="NAME=VALUE", help="Argument of train()."
)
@click.option(
    "--target",
    metavar="COLUMN",
    help="Tabular tasks: the target column, as a train job's target (train() gets it as target=...) "
    "[default: 'target' for the queries, train()'s own default for train()].",
)
@click.option("--seed", type=int, help="Makes the search and the trials reproducible.")
@click.option("--trial-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds before a trial is killed.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Where trial logs and parameters go.")
def test_model(
    file: Path,
    class_name: str,
    task: str,
    train_path: Path,
    val_path: Path,
    trials: int | None,
    time_hours: float | None,
    advisor: str,
    knobs: dict[str, Any],
    queries: list[Any] | None,
    train_args: dict[str, Any],
    target: str | None,
    seed: int | None,
    trial_timeout: float | None,
    run_dir: Path | None,
) -> None:
    """Search the knobs of template class --class in FILE on this machine, one process per trial.

    Prints each trial, a table of all of them and the best, checks that the best
    model's parameters reload with the same predictions, and exits with status 1 when
    the template is invalid, no trial succeeded or the reload check fails.

    Queries (for --queries and the reload checks) are what the template's predict()
    takes; without --queries the first validation examples are used: feature rows as
    lists of numbers for tabular tasks, images as nested lists of 0-255 ints otherwise.
    """
    if trials is not None and time_hours is not None:
        raise click.UsageError("--trials and --time-hours exclude each other: give one")
    # Imported here: the strategies load scikit-optimize and Optuna, which other commands do not need.
    from baobab.dev import run_dev

    try:
        result = run_dev(
            file,
            class_name,
            task=Task(task),
            train_path=train_path,
            val_path=val_path,
            trials=trials,
            time_hours=time_hours,
            advisor=advisor,
            knobs=knobs,
            queries=queries,
            train_args=train_args,
            target=target,
            seed=seed,
            trial_timeout=trial_timeout,
            run_dir=run_dir,
            echo=click.echo,
        )
    except StrategyError as e:
        raise click.BadParameter(str(e), param_hint="'--advisor'") from None
    except KnobConfigError as e:
        raise click.BadParameter(str(e), param_hint="'--knob'") from None
    except BaobabError as e:
        raise click.ClickException(str(e)) from None
    except ValueError as e:  # run_dev's arguments that the options above let through (--target)
        raise click.UsageError(str(e)) from None
    if not result.ok:
        raise click.exceptions.Exit(1)
