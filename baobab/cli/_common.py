"""What the commands that talk to a server share: the saved login, ``--url``, errors, tables.

``baobab login`` saves ``{"url", "token"}`` in ``credentials.json`` under
``click.get_app_dir("baobab")`` (``~/.config/baobab`` on Linux), readable by its owner
only. Every other command takes ``--url``; without it the saved URL is used, else
:data:`~baobab.sdk.DEFAULT_URL`. The saved token is sent only to the URL it was issued
by, so ``--url`` pointing elsewhere never leaks it.

A command wrapped in :func:`with_client` never shows a traceback for a failure it
expects: it prints ``error: <message> (field: <field>)`` on stderr and exits 1.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from tabulate import tabulate

from baobab.exceptions import BaobabError
from baobab.sdk import DEFAULT_URL, ApiError, Client

__all__ = [
    "assignments",
    "credentials_path",
    "delete_credentials",
    "fail",
    "format_size",
    "format_time",
    "json_option",
    "load_credentials",
    "print_json",
    "print_record",
    "print_table",
    "report",
    "resolve_url",
    "save_credentials",
    "with_client",
    "yes_option",
]

F = TypeVar("F", bound=Callable[..., Any])

_CREDENTIALS = "credentials.json"

json_option = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of a table.")
yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def credentials_path() -> Path:
    """Where ``baobab login`` keeps the URL and token (``$XDG_CONFIG_HOME/baobab/credentials.json`` on Linux)."""
    return Path(click.get_app_dir("baobab")) / _CREDENTIALS


def load_credentials() -> dict[str, str] | None:
    """The saved ``{"url", "token"}``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(credentials_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("url"), str) and isinstance(data.get("token"), str):
        return {"url": data["url"], "token": data["token"]}
    return None


def save_credentials(url: str, token: str) -> Path:
    """Writes the credentials file with mode 0600 (its folder 0700), atomically, and returns its path.

    The file is created with its final mode: there is no moment when another user could
    read the token.
    """
    path = credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{_CREDENTIALS}.", dir=path.parent)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"url": url, "token": token}, f)
        os.chmod(partial, 0o600)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    return path


def delete_credentials() -> bool:
    """Removes the saved login; False when there was none."""
    try:
        credentials_path().unlink()
    except FileNotFoundError:
        return False
    return True


def resolve_url(url: str | None) -> str:
    """``--url`` as given, else the saved login's URL, else the default."""
    if url:
        return url
    saved = load_credentials()
    return saved["url"] if saved else DEFAULT_URL


def _client(url: str | None) -> Client:
    client = Client(resolve_url(url))
    saved = load_credentials()
    if saved:
        with contextlib.suppress(ValueError):
            if Client(saved["url"]).url == client.url:
                client.token = saved["token"]
    return client


def fail(message: str) -> NoReturn:
    """Prints ``error: message`` on stderr and exits with status 1."""
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(1)


def report(error: BaseException, client: Client | None) -> NoReturn:
    """Prints an expected failure as one ``error:`` line (plus a hint), then exits 1."""
    if isinstance(error, ApiError):
        message = error.message + (f" (field: {error.field})" if error.field else "")
        if error.status == 401 and client is not None:
            action = "the saved login was refused" if client.token else f"you are not logged in to {client.url}"
            message += f"\n{action}: run `baobab login --url {client.url} --email EMAIL`"
        fail(message)
    if isinstance(error, OSError) and error.filename is not None:
        fail(f"{error.filename}: {error.strerror or error}")
    fail(str(error))


def with_client(f: F) -> F:
    """Adds ``--url`` and hands the command a logged-in :class:`Client` as its first argument.

    The expected failures (the API's errors, an unreachable server, a file that cannot
    be read or written) become an ``error:`` line and exit status 1.
    """

    @click.option(
        "--url",
        metavar="URL",
        help=f"The Baobab server. Default: the one of `baobab login`, else {DEFAULT_URL}.",
    )
    @functools.wraps(f)
    def wrapper(url: str | None, **kwargs: Any) -> Any:
        client = None
        try:
            client = _client(url)
            with client:
                return f(client, **kwargs)
        except (BaobabError, OSError, ValueError) as e:
            report(e, client)

    return wrapper  # type: ignore[return-value]


def assignments(
    text_values: Iterable[str], *, option: str, upper_keys: bool = False, json_only: bool = False
) -> dict[str, Any]:
    """Parses ``KEY=VALUE`` options; VALUE is read as JSON (``0.5``, ``true``, ``[1, 2]``), else as text.

    Raises:
        click.BadParameter: not ``KEY=VALUE``, a key given twice, or (``json_only``) not JSON.
    """
    parsed: dict[str, Any] = {}
    for text in text_values:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint=option)
        if upper_keys:
            key = key.upper()
        if key in parsed:
            raise click.BadParameter(f"{key!r} is given twice", param_hint=option)
        try:
            parsed[key] = json.loads(raw)
        except ValueError:
            if json_only:
                raise click.BadParameter(f"{key}: {raw!r} is not a JSON value", param_hint=option) from None
            parsed[key] = raw
    return parsed


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]


def print_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], *, empty: str, as_json: bool = False
) -> None:
    """Rows as a plain table with ``columns`` (header, key or function of the row); ``empty`` when none.

    With ``as_json`` (the commands' ``--json``), the rows as the API gave them instead.
    """
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo(empty)
        return
    body = [[_cell(row, get) for _, get in columns] for row in rows]
    click.echo(tabulate(body, headers=[header for header, _ in columns], tablefmt="simple", disable_numparse=True))


def print_record(row: Mapping[str, Any], fields: Sequence[Column], *, as_json: bool = False) -> None:
    """One object as ``name  value`` lines; with ``as_json``, as the API gave it."""
    if as_json:
        print_json(row)
        return
    body = [[f"{header}:", _cell(row, get)] for header, get in fields]
    click.echo(tabulate(body, tablefmt="plain", disable_numparse=True))


def _cell(row: Mapping[str, Any], get: str | Callable[[Mapping[str, Any]], Any]) -> str:
    value = get(row) if callable(get) else row.get(get)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def format_size(size: int | None) -> str | None:
    """``1536`` → ``1.5 KiB``."""
    if size is None:
        return None
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_time(stamp: str | None) -> str | None:
    """An ISO timestamp to the second, ``2025-01-31 12:00:05``."""
    return None if stamp is None else stamp.replace("T", " ")[:19]
