"""Cluster mode's services, one command each: ``baobab api``, ``advisor``, ``worker`` and ``predictor``.

Each runs in the foreground until SIGTERM and reads its settings from ``BAOBAB_*``
variables (docs/cluster.md lists which each needs). The server parts are
imported inside the commands: the rest of the CLI must not pay for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import click

from baobab import Settings
from baobab.exceptions import BaobabError

#: Where ``baobab advisor`` and ``baobab worker`` serve their Prometheus metrics by default (apart: both may run
#: on one machine).
ADVISOR_METRICS_PORT, WORKER_METRICS_PORT = 9102, 9101


F = TypeVar("F", bound=Callable[..., Any])


def _metrics_port(default: int) -> Callable[[F], F]:
    return click.option(
        "--metrics-port",
        default=default,
        show_default=True,
        type=click.IntRange(0, 65535),
        help="Port of GET /metrics (Prometheus), on every interface; 0: none.",
    )


def _settings() -> Settings:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    try:
        return Settings.from_env()
    except BaobabError as e:
        raise click.ClickException(str(e)) from e


@click.command()
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8100, show_default=True, type=click.IntRange(1, 65535))
@click.option("--processes", default=2, show_default=True, type=click.IntRange(1), help="gunicorn worker processes.")
@click.option("--threads", default=8, show_default=True, type=click.IntRange(1), help="Threads per process.")
def api(host: str, port: int, processes: int, threads: int) -> None:
    """Serve the admin API under gunicorn (upgrades the database schema first)."""
    from baobab._cluster import run_api

    settings = _settings()
    try:
        run_api(settings, host=host, port=port, processes=processes, threads=threads)
    except (BaobabError, ValueError) as e:
        raise click.ClickException(str(e)) from e


@click.command()
@click.option(
    "--slots",
    type=click.IntRange(1),
    help="Trials at once over every job. Default: what the workers report (their pool sizes).",
)
@_metrics_port(ADVISOR_METRICS_PORT)
def advisor(slots: int | None, metrics_port: int) -> None:
    """Drive train jobs on the Celery workers; run two for failover (they share jobs by leases)."""
    from baobab._cluster import run_advisor

    settings = _settings()
    try:
        run_advisor(settings, slots=slots, metrics_port=metrics_port or None)
    except (BaobabError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e


def _gpu_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str]:
    if value is None:
        return []
    gpus = [part.strip() for part in value.split(",")]
    if not all(gpu.isdigit() for gpu in gpus) or len(set(gpus)) != len(gpus):
        raise click.BadParameter(f"{value!r}: expected distinct GPU ids separated by commas, e.g. 0,1")
    return gpus


@click.command()
@click.option("--gpus", callback=_gpu_list, help="GPU ids, one trial per GPU (e.g. 0,1); takes GPU jobs' trials.")
@click.option("--slots", type=click.IntRange(1), help="Trials at once on CPUs. Default: $BAOBAB_CPU_SLOTS.")
@click.option("--queues", help="Queues to take trials from, separated by commas (baobab.cpu, baobab.gpu).")
@click.option("--name", help="The worker's node name (name@host). Default: baobab-<pid>@<host>.")
@_metrics_port(WORKER_METRICS_PORT)
def worker(gpus: list[str], slots: int | None, queues: str | None, name: str | None, metrics_port: int) -> None:
    """Run trials sent through the broker; reports to $BAOBAB_API_URL, needs no database credentials."""
    from baobab._cluster import run_worker

    settings = _settings()
    if settings.api_url is None:
        raise click.ClickException("baobab worker needs BAOBAB_API_URL: the admin API that trials report to")
    chosen = [q.strip() for q in queues.split(",") if q.strip()] if queues else []
    try:
        run_worker(settings, slots=slots, gpus=gpus, queues=chosen, name=name, metrics_port=metrics_port or None)
    except (BaobabError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface predictors listen on.")
@click.option("--job", "job_id", type=click.IntRange(1), help="Serve only this inference job (a container per job).")
@click.option(
    "--port", default=0, type=click.IntRange(0, 65535), help="Port of the --job predictor. Default: a free one."
)
@click.option("--advertise", help="Host name the API reaches predictors at. Default: this machine's name.")
def predictor(host: str, job_id: int | None, port: int, advertise: str | None) -> None:
    """Run the predictors of inference jobs on this machine (or of one, with --job)."""
    from baobab._cluster import run_predictor_host

    if port and job_id is None:
        raise click.UsageError("--port needs --job: predictors of several jobs each take a free port")
    settings = _settings()
    try:
        run_predictor_host(settings, host=host, job_id=job_id, port=port, advertise=advertise)
    except (BaobabError, ValueError) as e:
        raise click.ClickException(str(e)) from e
