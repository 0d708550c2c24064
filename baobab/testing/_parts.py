"""What a test does when a real part it needs (a server, an engine, a browser) is missing."""

from __future__ import annotations

import os
from typing import NoReturn

__all__ = ["missing_part"]


def missing_part(reason: str) -> NoReturn:
    """Fail the test in CI (``CI`` set), skip it elsewhere, with ``reason``.

    CI installs and starts every part, so a missing one there is a broken setup that a
    skip would hide; on a developer's machine it is just not installed.
    """
    import pytest  # here: the rest of baobab.testing serves the demo and benchmarks, which need no pytest

    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
