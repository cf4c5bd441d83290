"""npm packages for tests that run real JavaScript: pinned versions, installed once into a cache folder.

Each package's whole tree is locked: tests/support/npm-locks/<name>-<version>/ holds a package.json naming it
and the package-lock.json npm made for it (every transitive version with its integrity hash), so an upstream
release of a dependency of mermaid changes nothing here. `npm_package("mermaid", "11.17.2")` runs `npm ci` on
that lock into `DIR = <cache>/mermaid-11.17.2-<lock digest>` (the cache is `$BLOCKYARD_TEST_CACHE`, else
`~/.cache/blockyard-tests`) unless it is there already, and returns DIR; the package is then at
`DIR/node_modules/<name>`. A lock of several packages (a page's, with its bundler) has a folder named for
what it is for: `npm_lock("usestream-page", "esbuild")` installs npm-locks/usestream-page/ the same way. To add
or move a package: in a new folder of npm-locks, write the package.json (exact versions) and run
`npm install --package-lock-only --ignore-scripts` there. It is installed into a
staging folder beside DIR and renamed into place, so two test workers never see half an install (the loser of
the race throws its copy away). Without npm, or when the install fails, the test skips with the reason, and
fails under `CI=true` (tests/conftest.py). `.ci/run` installs node and npm where they are missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import skip_or_fail

NPM_TIMEOUT = 600
LOCKS = Path(__file__).resolve().parent / "npm-locks"


def cache_dir() -> Path:
    return Path(
        os.environ.get("BLOCKYARD_TEST_CACHE") or Path.home() / ".cache" / "blockyard-tests"
    )


def folder_name(name: str, version: str) -> str:
    """`@langchain/langgraph-sdk`, `2.0.0` -> `langchain+langgraph-sdk-2.0.0`: one plain folder name."""
    return f"{name.lstrip('@').replace('/', '+')}-{version}"


def npm_package(name: str, version: str, cache: Path | None = None) -> Path:
    """The prefix folder holding `name@version` (in its node_modules), installed from the npm registry if needed."""
    return npm_lock(folder_name(name, version), name, cache)


def npm_lock(folder: str, check: str, cache: Path | None = None) -> Path:
    """The prefix folder where the lock `npm-locks/<folder>` is installed (its packages in its node_modules),
    installed from the npm registry if needed; `check` names a package of it whose package.json shows the
    install is there (e.g. `npm_lock("usestream-page", "esbuild")`)."""
    cache = cache if cache is not None else cache_dir()
    lock = LOCKS / folder
    if not (lock / "package-lock.json").is_file():
        raise AssertionError(
            f"{folder} has no lock in {lock} (the module's docstring says how to make one)"
        )
    digest = hashlib.sha256((lock / "package-lock.json").read_bytes()).hexdigest()[:12]
    target = cache / f"{folder}-{digest}"
    if (target / "node_modules" / check / "package.json").is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        skip_or_fail(
            f"{check} comes from npm: install node and npm (`apt-get install -y nodejs npm`)"
        )
        raise AssertionError("unreachable")
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder}-", dir=cache))
    for file in ("package.json", "package-lock.json"):
        shutil.copy2(lock / file, staging / file)
    # `npm ci`: exactly the lock, integrity checked; --ignore-scripts: nothing of a package runs at install time
    done = subprocess.run(
        [
            npm,
            "ci",
            "--prefix",
            str(staging),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
        ],
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        skip_or_fail(f"npm ci of the lock {folder} failed: {last}")
        raise AssertionError("unreachable")
    try:
        staging.rename(target)
    except OSError:  # another worker installed it first
        shutil.rmtree(staging, ignore_errors=True)
    return target
