"""A click group whose sub-commands are imported only when one of them is run or listed.

Some commands' options are built from the server's parts (``baobab datasets build
tabular``'s choices come from :mod:`baobab.store`, which loads SQLAlchemy and pandas);
defining them eagerly would make ``baobab --help`` and every HTTP command pay for those
imports. The group names its sub-commands as ``"module:attribute"`` strings instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A :class:`click.Group` with ``lazy_commands``: name → ``"package.module:command"``, imported on first use."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command
