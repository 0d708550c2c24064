"""``baobab serve rollout|promote|rollback|versions``: what an inference job serves, and its share of the traffic.

A version is written ``NAME=TRIAL[,TRIAL...][@WEIGHT]``: ``v2=20,21@0.1`` is the
ensemble of trials 20 and 21 with weight 0.1 (a request goes to a version with
probability weight / sum of the weights; 1 when left out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from baobab.cli._common import Column, fail, format_time, json_option, print_json, print_table, with_client
from baobab.sdk import Client, JobFailedError, WaitTimeoutError

__all__ = ["promote", "rollback", "rollout", "versions"]

_COLUMNS: list[Column] = [
    ("version", "name"),
    ("weight", "weight"),
    ("share", lambda v: f"{v['share']:.0%}"),
    ("trials", lambda v: ", ".join(str(t) for t in v.get("trial_ids") or [])),
]
_HISTORY: list[Column] = [
    ("revision", "revision"),
    ("action", "action"),
    ("created", lambda r: format_time(r.get("created_at"))),
    ("versions", lambda r: ", ".join(f"{v['name']} {v['share']:.0%}" for v in r.get("versions") or [])),
    ("error", "error"),
]

wait_option = click.option("--wait", is_flag=True, help="Return once the predictor serves the new versions.")
timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), help="With --wait: give up after this many seconds."
)


def parse_version(text: str) -> dict[str, Any]:
    """``NAME=TRIAL[,TRIAL...][@WEIGHT]`` as the API takes a version.

    Raises:
        click.BadParameter: not in that form.
    """
    name, sep, rest = text.partition("=")
    trials, at, weight = rest.partition("@")
    try:
        trial_ids = [int(part) for part in trials.split(",")]
        version: dict[str, Any] = {"name": name.strip(), "trial_ids": trial_ids}
        if at:
            version["weight"] = float(weight)
    except ValueError:
        version = {}
    if not sep or not name.strip() or not version:
        raise click.BadParameter(
            f"{text!r} is not NAME=TRIAL[,TRIAL...][@WEIGHT] (e.g. v2=20,21@0.1)", param_hint="VERSION"
        )
    return version


@click.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@click.argument("specs", metavar="VERSION...", nargs=-1, required=True)
@wait_option
@timeout_option
@json_option
@with_client
def rollout(
    client: Client, inference_job_id: int, specs: tuple[str, ...], wait: bool, timeout: float | None, as_json: bool
) -> None:
    """Serve these versions, each NAME=TRIAL[,TRIAL...][@WEIGHT], in place of the ones served now.

    The predictor loads the new versions, then switches without dropping a request:
    `baobab serve rollout 7 v1=12,13@0.9 v2=20@0.1` sends a tenth of the requests to trial 20.
    """
    wanted = [parse_version(spec) for spec in specs]
    _show(client, client.set_versions(inference_job_id, wanted), wait, timeout, as_json)


@click.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@click.argument("name")
@wait_option
@timeout_option
@json_option
@with_client
def promote(client: Client, inference_job_id: int, name: str, wait: bool, timeout: float | None, as_json: bool) -> None:
    """Serve version NAME alone, with all the requests."""
    _show(client, client.promote_version(inference_job_id, name), wait, timeout, as_json)


@click.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@wait_option
@timeout_option
@json_option
@with_client
def rollback(client: Client, inference_job_id: int, wait: bool, timeout: float | None, as_json: bool) -> None:
    """Go back to the versions before the last change; again goes one step further back."""
    _show(client, client.rollback_versions(inference_job_id), wait, timeout, as_json)


@click.command()
@click.argument("inference_job_id", metavar="ID", type=int)
@click.option("--history", is_flag=True, help="List every revision of the versions, newest first.")
@json_option
@with_client
def versions(client: Client, inference_job_id: int, history: bool, as_json: bool) -> None:
    """Show the versions wanted and the ones served (or, with --history, every change)."""
    if history:
        found = client.get_revisions(inference_job_id, limit=200)
        print_table(found, _HISTORY, empty="no revisions", as_json=as_json)
        return
    _show(client, client.get_versions(inference_job_id), False, None, as_json)


def _show(client: Client, answer: Mapping[str, Any], wait: bool, timeout: float | None, as_json: bool) -> None:
    if wait:
        try:
            answer = client.wait_for_versions(answer["inference_job_id"], timeout=timeout)
        except (JobFailedError, WaitTimeoutError) as e:
            fail(str(e))
    if as_json:
        print_json(answer)
        return
    job_id, revision, served = answer["inference_job_id"], answer["revision"], answer["served_revision"]
    click.echo(f"inference job {job_id}, revision {revision}:")
    print_table(answer["versions"], _COLUMNS, empty="no versions")
    if answer["converged"]:
        click.echo(f"served now; `baobab serve rollback {job_id}` goes back" if answer["rollback_to"] else "served now")
    elif answer["error"]:
        click.echo(f"not served: {answer['error']}")
        click.echo(f"the predictor serves revision {served}" if served is not None else "nothing is served")
    elif served is None:
        click.echo(f"the predictor of inference job {job_id} is not serving yet ({answer['status']})")
    else:
        click.echo(f"the predictor serves revision {served} until the new versions are loaded")
