"""The headless browser the suite drives through Playwright's `executable_path` (the web page, the
useStream page, Mermaid's rendering): never `playwright install`, which downloads a browser of its own.

Debian's `chromium-headless-shell` first: the same Chromium build without the desktop browser around
it, which is what Playwright itself runs for `headless=True`. On 2 cores it cost the browser tests of
one pass 18.5 CPU-s against 29 with the full `chromium` (2026-11-29, two interleaved runs each), and
the suite is CPU-bound. The full browser is still taken when it is the one installed.
"""

from __future__ import annotations

import os
import shutil

INSTALL = "`apt-get install -y chromium-headless-shell` (Debian), or set BLOCKYARD_CHROMIUM"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find() -> str | None:
    """BLOCKYARD_CHROMIUM, else the headless shell, else a full Chromium on the PATH; None if none is."""
    return (
        os.environ.get("BLOCKYARD_CHROMIUM")
        or shutil.which("chromium-headless-shell")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
