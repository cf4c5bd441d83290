"""The README's runnable commands, as a newcomer pastes them on a machine whose system Python is externally
managed (PEP 668): the quick start makes its own environment (tests/support/docs_walk.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.docs_walk import REPO, externally_managed_python, walk


@pytest.mark.cpu_heavy(
    "a fresh machine's setup as pasted: a venv made and the project installed in it, then the flow run"
)
@pytest.mark.timeout(660)
def test_the_readme_runs_as_pasted_with_an_externally_managed_python(tmp_path: Path) -> None:
    result = walk(REPO / "README.md", tmp_path)
    # the quick start made its own environment, on that Python, and ran the flow there
    python = externally_managed_python()
    assert python is not None
    config = (tmp_path / "clone" / ".venv" / "pyvenv.cfg").read_text(encoding="utf-8")
    version = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    assert re.search(rf"^version_info = {re.escape(version)}$", config, re.M), config
    assert "loud: 'GREET: NAME=ADA'" in result.stdout  # the mock model's greeting, shouted
    assert "reply: Your name is Ada." in result.stdout
    assert (tmp_path / "clone" / "output" / "index.html").is_file(), "swe_team wrote its app"
