"""The web page's browser for the tests: Debian's chromium, headless, driven by Playwright
(tests/serve/test_serve_browser.py, test_serve_timeline.py; their fixtures come through conftest.py).

Never `playwright install` (it downloads a browser): the tests use /usr/bin/chromium, or the
browser named by BLOCKYARD_CHROMIUM. CI installs it with `apt-get install -y chromium`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 20_000


def chromium() -> str:
    path = (
        os.environ.get("BLOCKYARD_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if not path:
        pytest.fail(
            "the browser tests need chromium: `apt-get install -y chromium` (Debian), or set "
            "BLOCKYARD_CHROMIUM to a Chromium binary"
        )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), headless=True, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
