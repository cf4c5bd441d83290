"""The lock: what CI and contributors install is exactly uv.lock, hashes checked (docs/testing.md).

The published distributions keep ranges for users; the repository's own installs never re-resolve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CI = REPO / ".ci"


def _uv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CI / "uv"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_the_lock_agrees_with_pyproject() -> None:
    """A range edited in pyproject.toml without `bash .ci/uv lock` fails here, not in a later install."""
    result = _uv("lock", "--check", "--offline")
    assert result.returncode == 0, result.stderr


def test_every_locked_artifact_carries_its_hash() -> None:
    lock = tomllib.loads((REPO / "uv.lock").read_text(encoding="utf-8"))
    packages = lock["package"]
    assert len(packages) > 100, "the lock names the dev environment's packages"
    artifacts = 0
    for package in packages:
        if package.get("source", {}).get("editable") == ".":
            continue  # the engine itself, installed from this checkout
        assert "registry" in package["source"], (
            f"{package['name']} comes from {package['source']}, not PyPI"
        )
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        assert files, f"{package['name']} has no artifact in the lock"
        for file in files:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", file["hash"]), (package["name"], file)
            artifacts += 1
    assert artifacts > len(packages)


def test_the_lock_holds_every_dev_dependency_at_one_version() -> None:
    lock = tomllib.loads((REPO / "uv.lock").read_text(encoding="utf-8"))
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        if "version" in package:  # the engine's own entry has none: its version is dynamic
            versions.setdefault(package["name"], set()).add(package["version"])
    # the packages whose drift broke CI once (docs/testing.md) are among them, at one version each
    for name in (
        "pyyaml",
        "langgraph",
        "langchain-google-genai",
        "google-genai",
        "pytest",
        "mypy",
        "ruff",
    ):
        assert len(versions.get(name, set())) == 1, (name, versions.get(name))


def test_uv_itself_is_pinned_with_hashes() -> None:
    lines = (CI / "uv.txt").read_text(encoding="utf-8")
    pins = re.findall(r"^uv==([0-9.]+) \\$", lines, re.M)
    assert len(pins) == 1, lines
    hashes = re.findall(r"--hash=sha256:[0-9a-f]{64}", lines)
    assert len(hashes) >= 10, "one hash per platform's wheel and the sdist"
    version = _uv("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.split()[:2] == ["uv", pins[0]]


def test_the_ci_scripts_install_only_through_the_lock() -> None:
    """No `pip install` of a range in what CI runs: .ci/setup syncs the lock frozen, .ci/uv installs uv
    from its hashes; only .ci/latest resolves anew, on purpose, into a venv of its own."""
    setup = (CI / "setup").read_text(encoding="utf-8")
    assert re.search(r"^bash \.ci/uv sync --frozen --extra dev\b", setup, re.M), setup
    run = (CI / "run").read_text(encoding="utf-8")
    assert "bash .ci/setup --system" in run and "bash .ci/test" in run
    for script in ("run", "setup", "test", "stress"):
        text = (CI / script).read_text(encoding="utf-8")
        assert "pip install" not in text, f".ci/{script} installs outside the lock"
    uv = (CI / "uv").read_text(encoding="utf-8")
    assert re.findall(r"pip install[^\n]*", uv) == [
        "pip install --quiet --disable-pip-version-check --no-deps --require-hashes \\"
    ]
    latest = (CI / "latest").read_text(encoding="utf-8")
    assert ".venv-latest" in latest and "--upgrade" in latest


def test_the_published_distributions_keep_ranges() -> None:
    """Users get ranges (the engine installs beside their packages); pins are for the lock alone."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"]]
    for extra, items in project["optional-dependencies"].items():
        if extra != "dev":
            requirements += items
    assert requirements
    for requirement in requirements:
        assert "==" not in requirement, f"{requirement!r} pins a version for every user"


def test_the_debian_packages_are_named_in_one_place() -> None:
    listed = [
        line.split()
        for line in (CI / "debian-packages").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {package for package, *_ in listed} == {
        "chromium-headless-shell",
        "nodejs",
        "npm",
        "postgresql",
        "curl",
        "strace",
    }
    assert all(len(fields) == 2 for fields in listed), listed
    for script in ("run", "test", "latest"):
        text = (CI / script).read_text(encoding="utf-8")
        assert "apt-get" not in text, (
            f".ci/{script} installs a Debian package outside .ci/debian-packages"
        )


def test_the_npm_packages_the_tests_install_are_locked_whole() -> None:
    """tests/support/npm.py installs each JavaScript package with `npm ci` from its committed lock: every
    transitive version and integrity hash fixed, every top-level version exact, and the one the test names."""
    locks = sorted((REPO / "tests" / "support" / "npm-locks").iterdir())
    assert [lock.name for lock in locks] == [
        "langchain+langgraph-sdk-2.0.0",
        "mermaid-11.17.2",
        "usestream-page",
    ]
    langgraph_api = REPO / "tests" / "serve" / "langgraph_api"
    # the lock -> the test that installs it, and the package whose version that test names
    sources = {
        "mermaid-11.17.2": (REPO / "tests" / "review" / "mermaid_render.py", "mermaid"),
        "langchain+langgraph-sdk-2.0.0": (
            langgraph_api / "test_langgraph_sdk_js.py",
            "@langchain/langgraph-sdk",
        ),
        "usestream-page": (langgraph_api / "test_usestream_page.py", "@langchain/langgraph-sdk"),
    }
    for lock in locks:
        manifest = json.loads((lock / "package.json").read_text(encoding="utf-8"))
        tree = json.loads((lock / "package-lock.json").read_text(encoding="utf-8"))["packages"]
        for name, version in manifest["dependencies"].items():
            assert re.fullmatch(r"\d+\.\d+\.\d+", version), (lock.name, name, version)
            assert tree[f"node_modules/{name}"]["version"] == version
        source, named = sources[lock.name]
        version = manifest["dependencies"][named]
        assert f'"{version}"' in source.read_text(encoding="utf-8"), (lock.name, version)
        installed = {path: entry for path, entry in tree.items() if path}
        assert installed and all(
            entry.get("integrity", "").startswith("sha512-") for entry in installed.values()
        )
