"""``baobab serve``: serve a train job's best trials behind a predictor, change its versions, stop serving,
read its request logs.

``baobab serve APP`` is short for ``baobab serve start APP`` (an app named like a
sub-command is served with the long form). The versions commands (``rollout``,
``promote``, ``rollback``, ``versions``) are in :mod:`baobab.cli.serve_versions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from baobab.cli._common import (
    Column,
    fail,
    format_size,
    format_time,
    json_option,
    print_json,
    print_record,
    print_table,
    with_client,
    yes_option,
)
from baobab.cli.serve_versions import promote, rollback, rollout, versions
from baobab.sdk import Client, JobFailedError, WaitTimeoutError

__all__ = ["serve"]

_DEFAULT = "start"


def _members(job: Mapping[str, Any]) -> str:
    members = job.get("members") or []
    return ", ".join(
        f"trial {m.get('trial_id')} ({m.get('model_name')}"
        + (f", score {m['score']:.4g})" if isinstance(m.get("score"), (int, float)) else ")")
        for m in members
    )


_COLUMNS: list[Column] = [
    ("id", "id"),
    ("app", "app"),
    ("version", "app_version"),
    ("status", "status"),
    ("public", "public"),
    ("predictor", "predictor_url"),
    ("members", lambda j: len(j.get("members") or [])),
    ("created", lambda j: format_time(j.get("created_at"))),
]
_FIELDS: list[Column] = [
    *_COLUMNS[:6],
    ("train job", "train_job_id"),
    ("members", _members),
    ("versions", lambda j: ", ".join(f"{v['name']} (weight {v['weight']:g})" for v in j.get("versions") or [])),
    ("revision", lambda j: f"{j.get('revision')} (served: {j.get('served_revision') or '-'})"),
    ("owner", "owner_id"),
    ("created", lambda j: format_time(j.get("created_at"))),
    ("stopped", lambda j: format_time(j.get("stopped_at"))),
    ("request log rate", "request_log_rate"),
    ("error", "error"),
]
_LOG_COLUMNS: list[Column] = [("day", "day"), ("size", lambda d: format_size(d.get("size_bytes"))), ("file", "name")]


class _DefaultToStart(click.Group):
    """A group whose first argument, when it names no sub-command, is the APP of ``start``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [_DEFAULT, *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToStart)
def serve() -> None:
    """Serve trained models: `baobab serve APP` starts an inference job (see `baobab serve start --help`)."""


for _command in (rollout, promote, rollback, versions):
    serve.add_command(_command)


@serve.command()
@click.argument("app")
@click.option("--version", "-v", type=int, help="The train job's version [default: the latest].")
@click.option("--k", "-k", "k", type=click.IntRange(min=1), help="Serve the best K trials [default: 2].")
@click.option("--trial", "trial_ids", multiple=True, type=int, metavar="ID", help="Serve this trial (repeatable).")
@click.option("--public", is_flag=True, help="Answer predictions without an API key.")
@click.option(
    "--log-rate",
    type=click.FloatRange(0, 1),
    help="Log this share of the answered requests (see `baobab serve logs`) [default: 0, none].",
)
@click.option("--wait", is_flag=True, help="Return once the predictor answers, with its URL.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="With --wait: give up after this.")
@json_option
@with_client
def start(
    client: Client,
    app: str,
    version: int | None,
    k: int | None,
    trial_ids: tuple[int, ...],
    public: bool,
    log_rate: float | None,
    wait: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Start an inference job for APP's best trials; prints its API key (shown only once)."""
    if k is not None and trial_ids:
        raise click.UsageError("give --k or --trial, not both")
    job = client.create_inference_job(
        app, version, k=k, trial_ids=list(trial_ids) or None, public=public, request_log_rate=log_rate
    )
    api_key = job.get("api_key")
    if not as_json:
        click.echo(f"inference job {job['id']} for {job['app']} v{job['app_version']}: {_members(job)}")
        if api_key:
            click.echo(f"API key: {api_key}  (shown only now: keep it)")
    if wait:
        try:
            job = {**client.wait_for_inference_job(job["id"], timeout=timeout), "api_key": api_key}
        except (JobFailedError, WaitTimeoutError) as e:
            fail(str(e))
    if as_json:
        print_json(job)
        return
    if job.get("predictor_url"):
        click.echo(f"predictor URL: {job['predictor_url']}")
        auth = "" if job.get("public") else " --api-key KEY"
        click.echo(f"predict with `baobab predict --url {job['predictor_url']}{auth} --queries FILE.json`")
    else:
        click.echo(f"status {job['status']}; see its predictor URL with `baobab serve show {job['id']}`")


@serve.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@with_client
def stop(client: Client, inference_job_id: int) -> None:
    """Stop an inference job: its predictor stops answering."""
    job = client.stop_inference_job(inference_job_id)
    click.echo(f"inference job {job['id']} is {job['status']}")


@serve.command("list")
@click.option("--app", help="Only this application's inference jobs.")
@json_option
@with_client
def list_jobs(client: Client, app: str | None, as_json: bool) -> None:
    """List your inference jobs (all for an admin)."""
    found = client.list_inference_jobs(app)
    print_table(found, _COLUMNS, empty="no inference jobs; start one with `baobab serve APP`", as_json=as_json)


@serve.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@json_option
@with_client
def show(client: Client, inference_job_id: int, as_json: bool) -> None:
    """Show one inference job."""
    job = client.get_inference_job(inference_job_id)
    print_record(job, _FIELDS, as_json=as_json)


@serve.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@yes_option
@with_client
def delete(client: Client, inference_job_id: int, yes: bool) -> None:
    """Delete a stopped inference job and its request logs."""
    if not yes:
        click.confirm(f"delete inference job {inference_job_id} and its request logs?", abort=True, err=True)
    client.delete_inference_job(inference_job_id)
    click.echo(f"deleted inference job {inference_job_id}")


@serve.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@click.argument("day", required=False)
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    help="With DAY: the file to write, or a folder to write it into [default: its name, here].",
)
@json_option
@with_client
def logs(client: Client, inference_job_id: int, day: str | None, out: Path | None, as_json: bool) -> None:
    """List the days an inference job logged requests on; with DAY (YYYY-MM-DD, UTC), download that day's log."""
    if day is None:
        if out is not None:
            raise click.UsageError("--out needs a DAY to download")
        found = client.list_request_logs(inference_job_id)
        empty = f"inference job {inference_job_id} logged no requests (a job logs them when started with --log-rate)"
        print_table(found, _LOG_COLUMNS, empty=empty, as_json=as_json)
        return
    path = client.download_request_log(inference_job_id, day, out)
    click.echo(f"wrote {path}")
