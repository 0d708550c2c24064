"""``baobab jobs``: create, watch and stop train jobs, and look at their trials."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from baobab.cli._common import (
    Column,
    assignments,
    fail,
    format_time,
    json_option,
    print_json,
    print_record,
    print_table,
    with_client,
)
from baobab.sdk import Client, WaitTimeoutError

__all__ = ["jobs"]

_FINISHED_TRIALS = ("COMPLETED", "ERRORED", "STOPPED", "CANCELLED", "INVALID")


def _finished(job: Mapping[str, Any]) -> int:
    counts = job.get("trial_counts") or {}
    return sum(int(counts.get(state, 0)) for state in _FINISHED_TRIALS)


def _progress(job: Mapping[str, Any]) -> str:
    """Finished trials, over the trial budget when there is one (MODEL_TRIAL_COUNT per template)."""
    count = (job.get("budget") or {}).get("MODEL_TRIAL_COUNT")
    if not isinstance(count, int):
        return str(_finished(job))
    return f"{_finished(job)}/{count * max(len(job.get('sub_jobs') or ()), 1)}"


def _counts(job: Mapping[str, Any]) -> str:
    counts = job.get("trial_counts") or {}
    return ", ".join(f"{n} {state.lower()}" for state, n in counts.items() if n) or "none yet"


def _budget(job: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in (job.get("budget") or {}).items())


def _knobs(trial: Mapping[str, Any]) -> str:
    def show(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)

    return ", ".join(f"{name}={show(value)}" for name, value in (trial.get("knobs") or {}).items())


def _error_line(trial: Mapping[str, Any]) -> str | None:
    error = trial.get("error")
    if not error:
        return None
    first = error.strip().splitlines()[0] if error.strip() else error
    return first if len(first) <= 60 else first[:57] + "..."


_JOB_COLUMNS: list[Column] = [
    ("id", "id"),
    ("app", "app"),
    ("version", "app_version"),
    ("task", "task"),
    ("status", "status"),
    ("trials", _progress),
    ("best score", "best_score"),
    ("created", lambda j: format_time(j.get("created_at"))),
]
_JOB_FIELDS: list[Column] = [
    *_JOB_COLUMNS[:5],
    ("train dataset", "train_dataset_id"),
    ("val dataset", "val_dataset_id"),
    ("budget", _budget),
    ("target", "target"),
    ("train args", lambda j: j.get("train_args") or None),
    ("options", lambda j: j.get("options") or None),
    ("trials", _counts),
    ("best score", "best_score"),
    ("owner", "owner_id"),
    ("created", lambda j: format_time(j.get("created_at"))),
    ("started", lambda j: format_time(j.get("started_at"))),
    ("finished", lambda j: format_time(j.get("finished_at"))),
]
_SUB_JOB_COLUMNS: list[Column] = [
    ("sub-job", "id"),
    ("model", "model_id"),
    ("name", "model_name"),
    ("strategy", "strategy"),
    ("status", "status"),
    ("trials", _counts),
]
_TRIAL_COLUMNS: list[Column] = [
    ("id", "id"),
    ("no.", "number"),
    ("model", "model_name"),
    ("status", "status"),
    ("score", "score"),
    ("duration (s)", lambda t: None if t.get("duration_s") is None else f"{t['duration_s']:.1f}"),
    ("knobs", _knobs),
    ("error", _error_line),
]
_TRIAL_FIELDS: list[Column] = [
    ("id", "id"),
    ("train job", "train_job_id"),
    ("model", lambda t: f"{t.get('model_name')} (id {t.get('model_id')})"),
    ("number", "number"),
    ("status", "status"),
    ("score", "score"),
    ("knobs", _knobs),
    ("policies", lambda t: ", ".join(name for name, on in (t.get("policies") or {}).items() if on) or None),
    ("worker", "worker"),
    ("attempts", "attempts"),
    ("created", lambda t: format_time(t.get("created_at"))),
    ("started", lambda t: format_time(t.get("started_at"))),
    ("finished", lambda t: format_time(t.get("finished_at"))),
    ("duration (s)", "duration_s"),
    ("parameters", "has_params"),
    ("error", lambda t: (t.get("error") or "").strip().split("\n")[0] or None),  # the traceback follows
]

_app_argument = click.argument("app")
_version_option = click.option("--version", "-v", type=int, help="The job's version [default: the latest].")


@click.group()
def jobs() -> None:
    """Create, watch and stop train jobs; look at their trials."""


def _job_spec_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options that say what a train job is, which ``jobs create`` and ``jobs forecast`` take alike: the
    command gets them as ``spec``, the keyword arguments of the client's call."""
    options = [
        click.option(
            "--app", required=True, help="The application's name; each new job of an app is its next version."
        ),
        click.option(
            "--task",
            required=True,
            metavar="TASK",
            help="IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION or TABULAR_REGRESSION.",
        ),
        click.option("--train", "train_id", required=True, type=int, metavar="ID", help="The training dataset's id."),
        click.option("--val", "val_id", required=True, type=int, metavar="ID", help="The validation dataset's id."),
        click.option(
            "--model",
            "model_ids",
            required=True,
            multiple=True,
            type=int,
            metavar="ID",
            help="A template (repeatable).",
        ),
        click.option(
            "--budget",
            "budget_values",
            required=True,
            multiple=True,
            metavar="KEY=VALUE",
            help="MODEL_TRIAL_COUNT (per template), TIME_HOURS, GPU_COUNT (repeatable).",
        ),
        click.option(
            "--train-arg",
            "train_arg_values",
            multiple=True,
            metavar="KEY=JSON",
            help="An argument of train(), read as JSON, else as text (repeatable).",
        ),
        click.option(
            "--target",
            metavar="COLUMN",
            help="Tabular tasks: the datasets' target column, which train() receives as target= "
            "[default: the template's own].",
        ),
        click.option(
            "--option",
            "option_values",
            multiple=True,
            metavar="NAME=JSON",
            help="A job option, e.g. early_stopping=asha, 'policies={\"EARLY_STOP\": true}', warm_start=false "
            "(read as JSON, else as text; repeatable).",
        ),
        click.option("--strategy", help="The search strategy (random, bayes, tpe, ...) [default: auto]."),
    ]

    @functools.wraps(command)
    def with_spec(
        *,
        app: str,
        task: str,
        train_id: int,
        val_id: int,
        model_ids: tuple[int, ...],
        budget_values: tuple[str, ...],
        train_arg_values: tuple[str, ...],
        target: str | None,
        option_values: tuple[str, ...],
        strategy: str | None,
        **rest: Any,
    ) -> None:
        spec = {
            "app": app,
            "task": task.upper(),
            "train_dataset_id": train_id,
            "val_dataset_id": val_id,
            "model_ids": list(model_ids),
            "budget": assignments(budget_values, option="--budget", upper_keys=True, json_only=True),
            "train_args": assignments(train_arg_values, option="--train-arg") or None,
            "target": target,
            "options": assignments(option_values, option="--option") or None,
            "strategy": strategy,
        }
        command(spec=spec, **rest)

    for option in reversed(options):
        with_spec = option(with_spec)
    return with_spec


@jobs.command()
@_job_spec_options
@click.option("--watch", is_flag=True, help="Then watch it until it ends, as `baobab jobs watch` does.")
@json_option
@with_client
def create(client: Client, spec: dict[str, Any], watch: bool, as_json: bool) -> None:
    """Create a train job: tune the templates on the datasets within the budget."""
    job = client.create_train_job(**spec)
    if as_json:
        print_json(job)
    else:
        count = len(job.get("sub_jobs") or spec["model_ids"])
        click.echo(
            f"created train job {job['app']} v{job['app_version']} (id {job['id']}): "
            f"{count} model{'s' if count != 1 else ''}, budget {_budget(job)}"
        )
        if not watch:
            click.echo(f"watch it with `baobab jobs watch {job['app']} --version {job['app_version']}`")
    if watch:
        _watch(client, job["app"], job["app_version"], None, quiet=as_json)


_FORECAST_COLUMNS: list[Column] = [
    ("method", lambda f: f["method"]),
    ("time (s)", lambda f: f"{f['seconds']:.1f}"),
    ("trials finished", lambda f: f["trials_finished"]),
    ("unfinished", lambda f: f["trials_unfinished"]),
    ("utilisation", lambda f: f"{f['utilisation']:.0%}"),
]


@jobs.command()
@_job_spec_options
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True, help="Worker machines.")
@click.option("--slots", type=click.IntRange(1), help="Trial slots of each worker [default: the platform's].")
@json_option
@with_client
def forecast(client: Client, spec: dict[str, Any], workers: int, slots: int | None, as_json: bool) -> None:
    """How long the job `jobs create` would create takes on N workers, without creating it.

    Learned from the finished trials of the templates in your jobs; one line per placement
    method (search, and the baselines: fcfs is one trial per slot in turn).
    """
    answer = client.forecast_train_job(**spec, workers=workers, slots=slots)
    if as_json:
        print_json(answer)
        return
    if answer["fallback"]:
        fail(f"no forecast: {answer['fallback']}")
    click.echo(
        f"{answer['trials']} trials on {answer['workers']} worker{'s' if answer['workers'] != 1 else ''} "
        f"of {answer['slots']} slot{'s' if answer['slots'] != 1 else ''}, "
        f"from {answer['measured_trials']} finished trials:"
    )
    print_table(answer["forecasts"], _FORECAST_COLUMNS, empty="", as_json=False)


@jobs.command("list")
@click.option("--app", help="Only this application's jobs.")
@json_option
@with_client
def list_jobs(client: Client, app: str | None, as_json: bool) -> None:
    """List your train jobs (all for an admin), newest first."""
    found = client.list_train_jobs(app)
    print_table(found, _JOB_COLUMNS, empty="no train jobs; create one with `baobab jobs create`", as_json=as_json)


@jobs.command()
@_app_argument
@_version_option
@json_option
@with_client
def show(client: Client, app: str, version: int | None, as_json: bool) -> None:
    """Show a train job and its sub-jobs (one per template)."""
    job = client.get_train_job(app, version)
    if as_json:
        print_json(job)
        return
    print_record(job, _JOB_FIELDS)
    click.echo()
    print_table(job.get("sub_jobs") or [], _SUB_JOB_COLUMNS, empty="no sub-jobs")


@jobs.command()
@_app_argument
@_version_option
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Give up after this many seconds.")
@with_client
def watch(client: Client, app: str, version: int | None, timeout: float | None) -> None:
    """Show a progress bar until the job ends, then its best trials (exit 1 if it ERRORED)."""
    _watch(client, app, version, timeout, quiet=False)


def _watch(client: Client, app: str, version: int | None, timeout: float | None, *, quiet: bool) -> None:
    try:
        job = client.wait_for_train_job(app, version, timeout=timeout, progress=True)
    except WaitTimeoutError as e:
        fail(str(e))
    except KeyboardInterrupt:
        click.echo("\nstopped watching; the job goes on", err=True)
        raise click.exceptions.Exit(130) from None
    if not quiet:
        best = f", best score {job['best_score']:.4g}" if job.get("best_score") is not None else ""
        click.echo(f"train job {job['app']} v{job['app_version']} is {job['status']}: {_counts(job)}{best}")
        if _finished(job):
            best_trials = client.get_best_trials(job["app"], job["app_version"], k=3)
            print_table(best_trials, _TRIAL_COLUMNS[:-1], empty="no trial has parameters to serve")
    if job["status"] == "ERRORED":
        fail(f"train job {job['app']} v{job['app_version']} ERRORED; see `baobab jobs trials {job['app']}`")


@jobs.command()
@_app_argument
@_version_option
@with_client
def stop(client: Client, app: str, version: int | None) -> None:
    """Stop a train job: no new trials; running ones get a grace period."""
    job = client.stop_train_job(app, version)
    click.echo(f"train job {job['app']} v{job['app_version']} is {job['status']}")


@jobs.command()
@_app_argument
@_version_option
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--per-page", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option(
    "--sort",
    type=click.Choice(["-score", "score", "number", "-number", "created_at", "-created_at"]),
    default="number",
    show_default=True,
)
@click.option("--status", "statuses", multiple=True, metavar="STATE", help="Only trials in this state (repeatable).")
@click.option("--model", "model_id", type=int, metavar="ID", help="Only the trials of this template.")
@json_option
@with_client
def trials(
    client: Client,
    app: str,
    version: int | None,
    page: int,
    per_page: int,
    sort: str,
    statuses: tuple[str, ...],
    model_id: int | None,
    as_json: bool,
) -> None:
    """List a job's trials, a page at a time."""
    answer = client.get_trials(
        app,
        version,
        page=page,
        per_page=per_page,
        sort=sort,
        status=[s.upper() for s in statuses] or None,
        model_id=model_id,
    )
    if as_json:
        print_json(answer)
        return
    print_table(answer["trials"], _TRIAL_COLUMNS, empty="no trials")
    pages = max(1, -(-answer["total"] // answer["per_page"]))
    click.echo(f"page {answer['page']} of {pages} ({answer['total']} trials)")


@jobs.command()
@_app_argument
@_version_option
@click.option("-k", "k", type=click.IntRange(min=1), default=3, show_default=True, help="How many.")
@json_option
@with_client
def best(client: Client, app: str, version: int | None, k: int, as_json: bool) -> None:
    """List a job's best trials (those with parameters), best first."""
    found = client.get_best_trials(app, version, k=k)
    print_table(found, _TRIAL_COLUMNS[:-1], empty="no trial with parameters yet", as_json=as_json)


@jobs.command()
@click.argument("trial_id", metavar="TRIAL_ID", type=int)
@click.option("--logs", is_flag=True, help="Also print the trial's log lines.")
@click.option(
    "--params",
    "params_out",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Also download its parameters (safetensors) to this file or folder.",
)
@json_option
@with_client
def trial(client: Client, trial_id: int, logs: bool, params_out: Path | None, as_json: bool) -> None:
    """Show one trial (with the traceback of an ERRORED one)."""
    found = client.get_trial(trial_id)
    lines = client.get_trial_logs(trial_id) if logs else None
    if as_json:
        print_json({**found, "logs": lines} if logs else found)
    else:
        print_record(found, _TRIAL_FIELDS)
        if found.get("traceback"):
            click.echo("\n" + found["traceback"].rstrip())
        if lines is not None:
            click.echo()
            for line in lines:
                click.echo(f"{format_time(line.get('time'))}  {line.get('line')}")
            if not lines:
                click.echo("no log lines")
    if params_out is not None:
        path = client.download_trial_params(trial_id, params_out)
        click.echo(f"wrote {path}", err=as_json)
