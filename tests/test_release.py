""".ci/release-check, the release workflow's build job, run here offline: both distributions built
(each wheel from its sdist, the metapackage's version from engine/core/version.py through its sdist's copy),
`twine check`ed, installed into a fresh virtualenv and run on a copy of the example yard
(`blockyard --version`, `validate`, `run hello`). The dependencies come from this environment
(`--offline`); the script unsets BLOCKYARD_DATABASE_URL, so the run uses the yard's own SQLite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.version import __version__
from tests.support.venvs import clean_env

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "release-check"


def _check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        env=clean_env(PYTHON=sys.executable),
    )


@pytest.mark.cpu_heavy(
    "builds the wheel and the sdist, installs them in fresh venvs and runs the example yard"
)
@pytest.mark.timeout(300)
def test_the_release_check_builds_installs_and_runs_the_example_yard(tmp_path: Path) -> None:
    pytest.importorskip("twine", reason="the dev extra brings twine")
    done = _check("--offline", "--dist", tmp_path / "dist", "--tag", f"v{__version__}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in (tmp_path / "dist").iterdir()) == [
        f"blockyard-{__version__}-py3-none-any.whl",
        f"blockyard-{__version__}.tar.gz",
        f"blockyard_core-{__version__}-py3-none-any.whl",
        f"blockyard_core-{__version__}.tar.gz",
    ]
    assert f"blockyard, version {__version__}\n" in done.stdout
    assert "no problems in " in done.stdout + done.stderr
    assert "loud: 'GREET: NAME=WORLD'" in done.stdout  # `run hello` on the offline mock model
    assert "PASSED" in done.stdout  # twine check


def test_a_tag_that_is_not_the_version_stops_it_before_anything_is_built(tmp_path: Path) -> None:
    done = _check("--offline", "--dist", tmp_path / "dist", "--tag", "v0.0.0-not-it")
    assert done.returncode == 1
    assert done.stderr == (
        f"release-check: the tag v0.0.0-not-it is not v{__version__}, "
        "engine/core/version.py's version\n"
    )
    assert not (tmp_path / "dist").exists()


def test_the_script_is_strict_bash() -> None:
    script = SCRIPT.read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    syntax = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert syntax.returncode == 0, syntax.stderr
