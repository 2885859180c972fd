"""Headless Chromium for the end-to-end tests: Debian's /usr/bin/chromium, driven by Playwright.

Playwright's own browser downloads are never used (`playwright install` is
never run): the browser is the distribution's, started with exactly FLAGS,
a fresh profile directory, and the pipe Playwright talks to it through.
Without /usr/bin/chromium the tests are skipped with BROWSER_MISSING, loudly
(tests/conftest.py repeats it at the end of the run), except when
EMQD_REQUIRE_BROWSER=1 (as .ci/run sets it), where its absence fails them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
BROWSER_MISSING = (
    "CHROMIUM NOT INSTALLED: the browser tests of the dashboard were SKIPPED. "
    "Install Debian's chromium (apt-get install -y chromium) to run them."
)


def require_chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("EMQD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"EMQD_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
    pytest.skip(BROWSER_MISSING)


@contextmanager
def chromium() -> Iterator[object]:
    """A running Chromium (a Playwright `Browser`), closed and its profile deleted after."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="emqd-chromium-") as profile, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            ignore_default_args=True,  # exactly FLAGS, not Playwright's own list
            args=[*FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"],
            timeout=30_000,
        )
        try:
            yield browser
        finally:
            browser.close()
