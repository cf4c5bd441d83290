"""A private copy of the repository's example yard (blockyard.yaml, blocks, flows, the prompt
files they include, and the published schemas their `$schema` lines point at), for tests that
run it, change it or serve it. One helper, so a new folder of the example is copied everywhere."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("blocks", "flows", "prompts", "schemas", "evals")


def copy_example_yard(dest: Path) -> Path:
    """Copy the example yard to `dest` (created if missing) and return it."""
    dest.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, dest / folder)
    shutil.copy(REPO / "blockyard.yaml", dest / "blockyard.yaml")
    return dest
