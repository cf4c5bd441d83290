"""The wheel: it carries the JSON Schemas, installs, and `blockyard validate` works from it.

Runs in CI like every other test (about 10-20 s): the wheel is built offline with hatchling
(no build isolation), installed with --no-deps into a fresh venv that sees the system site
packages for its dependencies, and run from a temporary folder so that the checkout's own
`engine/` cannot be imported by accident.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from engine.spec.export import SCHEMAS

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # without PYTHONPATH: a checkout put on it (PYTHONPATH=$PWD) would be imported instead of the wheel
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=240, env=env)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="the dev extra (pip install -e '.[dev]') brings hatchling")
    out = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                 "-q", "-w", out, REPO, cwd=out)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("blockyard-*.whl")
    return path


@pytest.mark.timeout(300)
def test_the_wheel_carries_the_schemas(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for filename in SCHEMAS:
        assert f"engine/schemas/{filename}" in names
        packaged = zipfile.ZipFile(wheel).read(f"engine/schemas/{filename}").decode("utf-8")
        assert packaged == (REPO / "schemas" / filename).read_text(encoding="utf-8")
    assert "engine/cli/__init__.py" in names and "engine/validate/command.py" in names
    assert not any("__pycache__" in name or name.startswith("tests/") for name in names)


def test_the_wheel_says_the_package_is_typed(wheel: Path) -> None:
    """PEP 561: type checkers read the engine's annotations only when the package ships py.typed."""
    assert "engine/py.typed" in zipfile.ZipFile(wheel).namelist()


@pytest.mark.timeout(300)
def test_validate_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    created = _run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    installed = _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
                     wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    where = _run(python, "-c", "import engine.schema as s; print(s.__file__); print(s.schema_dir())",
                 cwd=tmp_path)
    module, schemas = where.stdout.splitlines()
    assert Path(module).is_relative_to(venv), "the wheel's engine must be the one imported"
    assert Path(schemas) == Path(module).parent / "schemas"

    yard = tmp_path / "yard"
    for folder in ("blocks", "flows", "prompts"):
        shutil.copytree(REPO / folder, yard / folder)
    shutil.copy(REPO / "blockyard.yaml", yard / "blockyard.yaml")  # the example yard's model profiles
    (yard / "flows" / "broken.yaml").write_text("flow: broken\nstep: []\n", encoding="utf-8")
    result = _run(venv / "bin" / "blockyard", "validate", "--format", "json", cwd=yard)
    assert result.returncode == 1, result.stderr
    assert result.stdout.count('"file": "flows/broken.yaml"') == 2
    (yard / "flows" / "broken.yaml").unlink()
    clean = _run(venv / "bin" / "blockyard", "validate", cwd=yard)
    assert (clean.returncode, clean.stdout) == (0, ""), clean.stderr
