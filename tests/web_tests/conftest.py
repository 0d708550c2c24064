"""Fixtures for the browser tests: Debian's Chromium driven by Python playwright, and a real ``baobab up``.

Chromium is the system's (``/usr/bin/chromium``, installed by ``make test``): playwright
may not download browsers here. Without it, or without the built UI
(``baobab/admin/web_dist``, built by ``make install``), the tests are skipped, except in
CI (``CI`` set), where they fail.

Screenshots go to ``test-artifacts/web/`` at the repository root, one file per page.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baobab.admin._web import _DEFAULT_DIR as WEB_DIST
from baobab.testing import missing_part

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts" / "web"


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    """A headless Chromium (a playwright ``Browser``), shared by the session."""
    if not CHROMIUM.exists():
        missing_part(f"{CHROMIUM} is not installed (make test installs Debian's chromium)")
    if not (WEB_DIST / "index.html").is_file():
        missing_part(f"the web UI is not built in {WEB_DIST} (run make install)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """The folder for screenshots, emptied of the last run's."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS
