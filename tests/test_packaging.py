"""The two distributions: `blockyard-core` (the repository root: the engine with what `blockyard
validate` needs, the runtime in its `run` extra) and `blockyard` (packaging/blockyard: a metapackage
requiring `blockyard-core[run]` of the same version). The core's wheel carries the JSON Schemas,
installs, and `blockyard validate` works from it without LangGraph — what pre-commit installs.

Runs in CI like every other test (about 10-20 s): the wheels are built offline with hatchling
(no build isolation), installed into fresh venvs, and run from a temporary folder so that the
checkout's own `engine/` cannot be imported by accident.
"""

from __future__ import annotations

import ast
import email
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from engine.cli import RUNTIME_MODULES
from engine.core import extras
from engine.core.version import __version__
from engine.spec.export import SCHEMAS
from engine.state.location import URL_ENV
from tests.support.example import copy_example_yard
from tests.support.venvs import site_packages, venv_on_this_environment, venv_with_pip

REPO = Path(__file__).resolve().parents[1]
METAPACKAGE = REPO / "packaging" / "blockyard"
# what `blockyard validate` imports (tests/validate/test_validate_imports.py keeps the runtime out of it)
CORE = {"pyyaml", "jsonschema", "jinja2", "pydantic", "click", "google-re2", "croniter"}
RUNTIME = {
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "aiosqlite",
    "langchain-core",
    "langchain-openai",
    "openai",
    "watchfiles",
    "fastapi",
    "uvicorn",
    "sse-starlette",
    "httpx",
    "anyio",
    "prometheus-client",
}


def _run(*args: str | Path, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    # without PYTHONPATH: a checkout put on it (PYTHONPATH=$PWD) would be imported instead of the wheel;
    # without the suite's database URL (the Postgres pass): the yard's own SQLite file, unless one is given
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", URL_ENV)}
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**env, **extra_env},
    )


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder with both wheels: the core's (the root) and the metapackage's."""
    pytest.importorskip(
        "hatchling", reason="the dev extra (pip install -e '.[dev]') brings hatchling"
    )
    out = tmp_path_factory.mktemp("dist")
    for project in (REPO, METAPACKAGE):  # `build`, not pip: the locked .venv (uv's) has no pip
        built = _run(
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            out,
            project,
            cwd=out,
        )
        assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="module")
def wheel(wheels: Path) -> Path:
    (path,) = wheels.glob("blockyard_core-*.whl")
    return path


@pytest.fixture(scope="module")
def metapackage(wheels: Path) -> Path:
    (path,) = wheels.glob("blockyard-*.whl")
    return path


def _metadata(wheel: Path) -> Message:
    archive = zipfile.ZipFile(wheel)
    (name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(archive.read(name))


def _requires(metadata: Message, extra: str = "") -> set[str]:
    """The requirements in force for `extra` ("": a plain install), as written (`name[extras]specifier`)."""
    found = set()
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
            requirement.marker = None
            found.add(str(requirement))
    return found


def _names(requirements: Iterable[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def test_the_core_requires_only_what_validation_needs(wheel: Path) -> None:
    """pre-commit's `pip install .` installs these and nothing of the runtime."""
    metadata = _metadata(wheel)
    assert (metadata["Name"], metadata["Version"]) == ("blockyard-core", __version__)
    assert _names(_requires(metadata)) == CORE
    assert _names(_requires(metadata, "run")) - CORE == RUNTIME
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"run", "anthropic", "google", "mcp", "dspy", "postgres", "dev"} <= extras
    # every extra is a runtime feature (or the development setup): it brings the runtime
    for extra in extras:
        assert _requires(metadata, "run") <= _requires(metadata, extra), extra
    entry_points = zipfile.ZipFile(wheel).read(
        "blockyard_core-" + __version__ + ".dist-info/entry_points.txt"
    )
    assert "blockyard = engine.console:main" in entry_points.decode("utf-8")


def test_the_metapackage_is_the_core_with_its_runtime_of_the_same_version(
    wheel: Path, metapackage: Path
) -> None:
    """`pip install blockyard` stays complete, and `blockyard[postgres]` is the core's postgres extra."""
    metadata, core = _metadata(metapackage), _metadata(wheel)
    assert (metadata["Name"], metadata["Version"]) == ("blockyard", __version__)
    assert _requires(metadata) == {f"blockyard-core[run]=={__version__}"}
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert extras == set(core.get_all("Provides-Extra") or []) - {"run", "dev"}
    for extra in extras:
        assert _requires(metadata, extra) - _requires(metadata) == {
            f"blockyard-core[{extra}]=={__version__}"
        }
    assert all(".dist-info/" in name for name in zipfile.ZipFile(metapackage).namelist()), (
        "no code of its own"
    )


def test_the_version_is_written_once_and_the_metapackage_pins_it() -> None:
    """engine/core/version.py is the version; the core reads it, and so does the metapackage's build hook
    (packaging/blockyard/hatch_build.py), which pins every requirement to it (the built wheel's metadata:
    test_the_metapackage_is_the_core_with_its_runtime_of_the_same_version; its sdist alone builds the same
    wheel: tests/test_release.py)."""
    core = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in core["project"] and core["project"]["dynamic"] == ["version"]
    assert core["tool"]["hatch"]["version"]["path"] == "engine/core/version.py"
    meta = tomllib.loads((METAPACKAGE / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    assert not {"version", "dependencies", "optional-dependencies"} & set(project)
    assert set(project["dynamic"]) == {"version", "dependencies", "optional-dependencies"}
    assert set(meta["tool"]["hatch"]["metadata"]["hooks"]["custom"]["extras"]) == (
        set(core["project"]["optional-dependencies"]) - {"run", "dev"}
    )
    assert meta["tool"]["hatch"]["build"]["targets"]["sdist"]["force-include"] == {
        "../../engine/core/version.py": "engine_version.py"
    }


def _closure(
    requirements: Iterable[str],
) -> tuple[dict[str, importlib.metadata.Distribution], set[str]]:
    """The installed distributions that `requirements` bring, with their own dependencies (name -> it),
    and the names of those not installed here."""
    found: dict[str, importlib.metadata.Distribution] = {}
    absent: set[str] = set()
    todo = [Requirement(line) for line in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found or name in absent or name == "blockyard-core":
            # the core's own extras name itself
            continue
        try:
            found[name] = distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            absent.add(name)
            continue
        extras = {"", *requirement.extras}
        for line in distribution.requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                todo.append(needed)
    return found, absent


def _modules(distributions: Iterable[str]) -> set[str]:
    """The top-level modules the installed `distributions` provide."""
    wanted = {canonicalize_name(name) for name in distributions}
    return {module for module, names in _packages_distributions().items() if wanted & names}


@functools.cache
def _packages_distributions() -> dict[str, set[str]]:
    """Top-level module -> the installed distributions providing it (a scan of them all: once)."""
    return {
        module: {canonicalize_name(name) for name in names}
        for module, names in importlib.metadata.packages_distributions().items()
    }


def test_the_cli_knows_the_runtime_modules() -> None:
    """engine/cli names a missing runtime module as the runtime missing: its list covers the `run` extra,
    and every module the engine imports comes from the core, the runtime or an optional extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert _names(extras["run"]) == RUNTIME
    assert _modules(RUNTIME) <= RUNTIME_MODULES
    imported = set()
    for path in (REPO / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.partition(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"engine"}
    core, absent = _closure(project["dependencies"])
    assert absent == set()
    # an optional extra this environment lacks (none with the dev extra, which installs them all): its module is
    # named as its distribution
    optional, absent = _closure(
        line for name, lines in extras.items() if name not in ("run", "dev") for line in lines
    )
    # what the runtime brings counts as the runtime (starlette, through FastAPI), not as an extra's
    runtime, _ = _closure(extras["run"])
    extra_modules = _modules(optional) - _modules(runtime) | {
        name.replace("-", "_") for name in absent
    }
    provided = _modules(core) | RUNTIME_MODULES | extra_modules
    assert sorted(third_party - provided) == []
    assert sorted(RUNTIME_MODULES & _modules(core)) == [], (
        "the core installs them: they are not the runtime"
    )


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


@pytest.mark.cpu_heavy(
    "installs the wheel in a fresh venv and validates the example yard with it, a fresh interpreter"
)
@pytest.mark.timeout(300)
def test_validate_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = venv_on_this_environment(venv) / "python"
    installed = _run(
        python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr

    where = _run(
        python,
        "-c",
        "import engine.definitions.schema as s; print(s.__file__); print(s.schema_dir())",
        cwd=tmp_path,
    )
    module, schemas = where.stdout.splitlines()
    assert Path(module).is_relative_to(venv), "the wheel's engine must be the one imported"
    # engine/schemas, beside engine/definitions
    assert Path(schemas) == Path(module).parents[1] / "schemas"

    yard = copy_example_yard(tmp_path / "yard")  # with the example yard's model profiles
    (yard / "flows" / "broken.yaml").write_text("flow: broken\nstep: []\n", encoding="utf-8")
    result = _run(venv / "bin" / "blockyard", "validate", "--format", "json", cwd=yard)
    assert result.returncode == 1, result.stderr
    assert result.stdout.count('"file": "flows/broken.yaml"') == 2
    (yard / "flows" / "broken.yaml").unlink()
    clean = _run(venv / "bin" / "blockyard", "validate", cwd=yard)
    assert (clean.returncode, clean.stdout) == (0, ""), clean.stderr


def _slim_venv(venv: Path, wheel: Path, tmp_path: Path) -> Path:
    """A fresh venv holding the core wheel and only the distributions its plain requirements bring:
    what pre-commit makes for the hook (`python -m venv`, then `pip install .` of the repository,
    i.e. its wheel). Offline: the dependencies are copied from this environment's installed
    distributions (their files and .dist-info, as pip installed them), then pip installs the wheel
    with --no-index, so it must find every requirement of the core already there; one it lacks
    (langgraph, say) fails the install."""
    python = venv_with_pip(venv) / "python"  # with pip: uv's .venv has none
    site = site_packages(venv)
    dependencies, absent = _closure(_requires(_metadata(wheel)))
    assert absent == set()
    for distribution in dependencies.values():
        for file in distribution.files or []:
            source = Path(str(distribution.locate_file(file)))
            if file.parts[0] != ".." and source.is_file():
                # not its scripts in bin/: the hook needs none
                (site / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, site / file)
    installed = _run(python, "-m", "pip", "install", "--no-index", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    return python


# each command run in the core-only venv -> whether it works there (else: it needs the runtime)
LIGHT = [
    "validate",
    "diff . .",
    "diff --state . .",
    "flows",
    "blocks",
    "runs",
    "gates",
    "threads",
    "schedules",
    "db status",
    "init fresh",
]
NEEDS_RUNTIME = [
    "run hello",
    "resume 0123",
    "graph hello",
    "test",
    "memory list global",
    "serve",
    "watch",
    "gates --expire",
    "export langgraph",
    "export reactflow hello",
    "db copy --to sqlite:///copy.db",
    "mcp",
]
PROBE = """import contextlib, io, json, sys
from engine.cli import main
results = {}
for command in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(command.split())
    results[command] = [code, err.getvalue()]
print(json.dumps(results))
"""


@pytest.mark.cpu_heavy(
    "installs the wheel without its extras in a fresh venv, then runs a command of each extra"
)
@pytest.mark.timeout(300)
def test_the_core_alone_validates_and_the_rest_says_what_to_install(
    wheel: Path, tmp_path: Path
) -> None:
    """What the pre-commit hook gets: `blockyard validate` works with no LangGraph installed, and a
    command that needs the runtime says so in one line (exit 2), never a traceback."""
    python = _slim_venv(tmp_path / "venv", wheel, tmp_path)
    blockyard = tmp_path / "venv" / "bin" / "blockyard"
    missing = _run(python, "-c", "import langgraph", cwd=tmp_path)
    assert "No module named 'langgraph'" in missing.stderr
    yard = copy_example_yard(tmp_path / "yard")

    clean = _run(blockyard, "validate", cwd=yard)
    assert (clean.returncode, clean.stdout) == (0, ""), clean.stderr
    assert clean.stderr.startswith("no problems in ")
    version = _run(blockyard, "--version", cwd=yard)
    assert (version.returncode, version.stdout) == (0, f"blockyard, version {__version__}\n"), (
        version.stderr
    )
    run = _run(blockyard, "run", "hello", cwd=yard)
    assert (run.returncode, run.stdout) == (2, "")
    assert (
        run.stderr
        == f"error: blockyard run needs the engine's runtime, and {extras.missing('run')}\n"
    )

    probed = _run(python, "-c", PROBE, json.dumps(LIGHT + NEEDS_RUNTIME), cwd=yard)
    assert probed.returncode == 0, probed.stderr
    results = json.loads(probed.stdout)
    assert {command: results[command][0] for command in LIGHT} == dict.fromkeys(LIGHT, 0)
    for command in NEEDS_RUNTIME:
        # a group's subcommand is named with it (`blockyard db copy`), a command's arguments are not
        words = (
            command.split()[:2] if command.split()[0] in ("export", "db") else command.split()[:1]
        )
        line = f"error: blockyard {' '.join(words)} needs the engine's runtime, and {extras.missing('run')}\n"
        assert results[command] == [2, line], command
    # a state database on Postgres needs that extra too: the commands that only look say which
    on_postgres = _run(
        blockyard, "runs", cwd=yard, **{URL_ENV: "postgresql://u:secret@127.0.0.1:9/x"}
    )
    assert (on_postgres.returncode, on_postgres.stderr) == (
        2,
        (
            f"error: blockyard runs: its state database is on Postgres, and {extras.missing('postgres')}\n"
        ),
    )
