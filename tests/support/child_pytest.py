"""A pytest run of a small suite written by a test, in a child process, as the suite runs its own: only
the plugins named (pyproject.toml's addopts say why), none of the suite's options, output captured."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run(
    folder: Path, env: Mapping[str, str], *args: str, plugins: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    loaded = [word for plugin in plugins for word in ("-p", plugin)]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--disable-plugin-autoload",
            *loaded,
            "-o",
            "addopts=",
            *args,
        ],
        cwd=folder,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
