"""``baobab up``: the whole platform on this machine, until Ctrl-C or SIGTERM.

The platform is imported inside the command: the rest of the CLI is an HTTP client
and must not pay for (or need) the server's dependencies.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType

import click

from baobab import Settings
from baobab.exceptions import BaobabError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface the API and predictors listen on.")
@click.option("--port", default=8100, show_default=True, type=click.IntRange(0, 65535), help="API port; 0: any free.")
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the database, artifacts and logs. Default: $BAOBAB_HOME, else ~/.baobab.",
)
@click.option(
    "--workers",
    type=click.IntRange(1),
    help="Trials run at once (worker processes). Default: $BAOBAB_CPU_SLOTS, else the usable cores.",
)
def up(host: str, port: int, home: Path | None, workers: int | None) -> None:
    """Start the admin API, job driver, workers and predictors; print the URL once it answers."""
    from baobab._platform import Platform

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(home=home.expanduser().resolve()) if home else Settings.from_env()
    except BaobabError as e:
        raise click.ClickException(str(e)) from e
    platform = Platform(settings, host=host, port=port, workers=workers or settings.cpu_slots)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        platform.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        url = platform.start()
    except (BaobabError, RuntimeError, OSError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"Baobab is up at {url} (home {settings.home}); Ctrl-C stops it.", err=True)
    click.echo(url)
    try:
        platform.wait()
    finally:
        click.echo("stopping...", err=True)
        platform.stop()
        click.echo("stopped", err=True)
