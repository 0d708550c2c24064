"""``baobab login`` and ``baobab logout``: keep a token for the commands that talk to a server."""

from __future__ import annotations

import click

from baobab.cli._common import delete_credentials, load_credentials, report, resolve_url, save_credentials
from baobab.exceptions import BaobabError
from baobab.sdk import Client

__all__ = ["login", "logout"]


@click.command()
@click.option("--url", metavar="URL", help="The Baobab server. Default: the last one logged in to, else the local one.")
@click.option("--email", required=True, help="Your account's email.")
@click.option(
    "--password",
    help="Your password; asked for when left out (safer: a password on the command line stays in the shell history).",
)
def login(url: str | None, email: str, password: str | None) -> None:
    """Log in, and save the URL and token for the other commands (readable by you only)."""
    if password is None:
        password = click.prompt("Password", hide_input=True)
    client = None
    try:
        client = Client(resolve_url(url))
        with client:
            answer = client.login(email, password)
        path = save_credentials(client.url, answer["token"])
    except (BaobabError, OSError, ValueError) as e:
        report(e, None)
    user = answer["user"]
    hours = answer.get("expires_in", 0) / 3600
    click.echo(f"logged in to {client.url} as {user['email']} ({user['role']})")
    click.echo(f"token saved in {path}, valid for {hours:g} hours")


@click.command()
def logout() -> None:
    """Forget the saved token."""
    saved = load_credentials()
    if not delete_credentials():
        click.echo("not logged in")
        return
    click.echo(f"logged out of {saved['url']}" if saved else "removed the saved login")
