"""Waiting in tests on processes and threads: poll with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_until"]


def wait_until(
    predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "the condition", interval: float = 0.02
) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that.

    A fixed sleep is either too short on a busy machine (a flaky test) or too long on
    an idle one (a slow suite); a deadline is only reached when something is wrong.

    Raises:
        AssertionError: ``timeout`` seconds passed; the message names ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
