"""The web page's browser for the tests: Debian's headless Chromium driven by Playwright
(tests/serve/test_serve_browser.py, test_serve_timeline.py; their fixtures come through conftest.py).
Which binary, and why: tests/support/chromium.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chromium import ARGS, INSTALL
from tests.support.chromium import find as find_chromium

TIMEOUT_MS = 20_000


def chromium() -> str:
    path = find_chromium()
    if not path:
        pytest.fail(f"the browser tests need a headless Chromium: {INSTALL}")
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
