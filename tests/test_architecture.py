"""The architecture of docs/architecture.md, checked: the import contracts in pyproject.toml hold
(`lint-imports`: layers, no LangGraph under validation, no cycles), every part of the engine has its
layer, and the few imports that live inside functions are there for a reason."""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENGINE = REPO / "engine"

LANGGRAPH = "keeps LangGraph (the runtime, the compiler) out of the CLI's light commands"
SERVER = "keeps the server's parts (FastAPI, uvicorn, watchfiles) out of the CLI's light commands"
CRONITER = "croniter costs ~10 ms: a yard without schedules never loads it (tests/validate/test_validate_imports.py)"
LANGCHAIN = "a provider's LangChain client loads only when a model of that provider is used"
EXTRA = "an optional extra (dspy, mcp, anthropic, google): imported only when it is used"
COLD = "keeps it off a cold `blockyard run` of a flow that does not use it (tests/runtime/test_cold_start.py)"
POSTGRES = "psycopg and LangGraph's Postgres parts (the postgres extra) load only for a Postgres state database"

# (module, what it imports inside a function) -> why. Anything else belongs at the top of its module:
# an import inside a function must not dodge a cycle (the layers of pyproject.toml say who imports whom).
ALLOWED: dict[tuple[str, str], str] = {
    (
        "engine",
        "engine.runtime.yard",
    ): "`from engine import Yard` loads the runtime only when asked for",
    (
        "engine.cli.validate",
        "engine.review.versions",
    ): "the version policy (git, two yards compared): only "
    "`validate --base` loads it; a pre-commit hook starts fast",
    (
        "engine.cli.diff",
        "engine.cli.serverstate",
    ): "httpx costs ~0.2 s: only `blockyard diff --server` loads it",
    ("engine.cli.export", "engine.runtime.exported"): LANGGRAPH,
    ("engine.cli.flowtests", "engine.runtime.yard"): LANGGRAPH,
    ("engine.cli.db", "engine.state.checkpointer"): LANGGRAPH,
    ("engine.cli.db", "engine.state.transfer"): LANGGRAPH,
    ("engine.compile", "engine.compile.compiled"): LANGGRAPH
    + " (`blockyard diff` draws flows with compile/draw.py)",
    ("engine.compile", "engine.compile.flow"): LANGGRAPH
    + " (`blockyard diff` draws flows with compile/draw.py)",
    (
        "engine.compile.compiled",
        "engine.compile.draw",
    ): "the graph model and its renderers load for a drawing (`blockyard graph`) only; " + COLD,
    ("engine.cli.gates", "engine.runtime.yard"): LANGGRAPH,
    ("engine.cli.interchange", "engine.runtime.yard"): LANGGRAPH,
    ("engine.cli.memory", "engine.state.memory"): LANGGRAPH + " (LangGraph's memory store)",
    (
        "engine.cli.run",
        "engine.interchange.taskplan",
    ): "the TaskPlan converter: only `run --plan` and `compose --run` load it; " + COLD,
    ("engine.cli.run", "engine.runtime.approvals"): LANGGRAPH,
    ("engine.cli.run", "engine.runtime.yard"): LANGGRAPH,
    ("engine.cli.serve", "engine.spec.cron"): CRONITER,
    ("engine.cli.serve", "engine.serve"): SERVER,
    ("engine.cli.serve", "engine.serve.app"): SERVER,
    ("engine.cli.serve", "engine.serve.auth"): SERVER,
    ("engine.cli.serve", "engine.serve.schedules"): CRONITER,
    ("engine.cli.serve", "engine.serve.server"): SERVER,
    ("engine.cli.serve", "engine.serve.watcher"): SERVER,
    ("engine.cli.serve", "uvicorn"): SERVER,
    ("engine.cli.mcp_stdio", "engine.serve"): SERVER + " and the mcp extra (`blockyard mcp`)",
    ("engine.cli.mcp_stdio", "engine.serve.server"): SERVER,
    ("engine.cli.mcp_stdio", "mcp.server.stdio"): EXTRA,
    ("engine.serve.mcp_mount", "engine.serve"): EXTRA
    + ": the MCP tools at /mcp load at its first request",
    (
        "engine.models.providers.mock",
        "engine.models.providers.replay",
    ): "LangChain's chat model classes load "
    "only when the mock answers inside a LangChain run (LangGraph's `messages` stream): " + COLD,
    (
        "engine.models.replies",
        "re2",
    ): "RE2 loads only for scripted replies with a regex rule: validate stays fast",
    ("engine.models.providers.anthropic", "langchain_anthropic"): EXTRA,
    ("engine.models.providers.azure", "langchain_openai"): LANGCHAIN,
    ("engine.models.providers.google", "langchain_google_genai"): EXTRA,
    ("engine.models.providers.chat", "langchain_core.messages"): LANGCHAIN,
    ("engine.models.providers.mock", "langchain_core.messages"): LANGCHAIN,
    (
        "engine.models.cached",
        "langchain_core.messages",
    ): "an agent's reply from the response cache of `blockyard "
    "eval` becomes a message again (LangChain is loaded: an "
    "agent runs); " + COLD,
    (
        "engine.validate.evalchecks",
        "jsonschema",
    ): "jsonschema checks only an eval's json_schema assertions: validate stays fast",
    ("engine.validate.evalchecks", "jsonschema.exceptions"): "(the same) validate stays fast",
    ("engine.models.providers.openai", "langchain_openai"): LANGCHAIN,
    (
        "engine.models.structured",
        "jsonschema",
    ): "jsonschema only words a reply the quick check refused; " + COLD,
    ("engine.models.structured", "jsonschema.exceptions"): "(the same) " + COLD,
    (
        "engine.tools.registry",
        "jsonschema",
    ): "jsonschema only for tool arguments the quick check refused; " + COLD,
    ("engine.tools.registry", "jsonschema.exceptions"): "(the same) " + COLD,
    (
        "engine.tools.loader",
        "jsonschema",
    ): "jsonschema only for tools whose `parameters` the yard writes; " + COLD,
    ("engine.tools.loader", "jsonschema.exceptions"): "(the same) " + COLD,
    (
        "engine.definitions.schema",
        "jsonschema",
    ): "jsonschema runs only to explain a document pydantic refused (see the module)",
    (
        "engine.definitions.schema",
        "jsonschema.exceptions",
    ): "jsonschema runs only to explain a document pydantic refused",
    ("engine.serve.catalog", "engine.compile"): LANGGRAPH
    + " (`blockyard schedules` reads the catalog)",
    ("engine.smart", "dspy"): EXTRA,
    ("engine.state.backends", "engine.state.postgres"): POSTGRES,
    ("engine.state.checkpointer", "engine.state.pgsaver"): POSTGRES,
    ("engine.state.checkpointer", "engine.state.postgres"): POSTGRES,
    ("engine.state.memory", "engine.state.postgres"): POSTGRES,
    (
        "engine.state.memory",
        "langgraph.store.sqlite",
    ): "LangGraph's SQLite store loads sqlite-vec and numpy "
    "(~0.1 s): only a flow with memory opens it; " + COLD,
    (
        "engine.runtime.sync",
        "anyio.from_thread",
    ): "anyio's portal: only the sync API (`yard.run`) needs it, the "
    "CLI runs on asyncio.run; " + COLD,
    ("engine.state.memory", "langgraph.store.postgres"): POSTGRES,
    ("engine.smart.lm", "dspy.utils.dummies"): EXTRA,
    ("engine.smart.optimize", "dspy.teleprompt"): EXTRA,
    ("engine.tools.builtin.http", "httpx"): "the HTTP client loads on a tool's first request "
    "(tests/tools/test_tool_imports.py)",
    ("engine.tools.mcp", "langchain_mcp_adapters.sessions"): EXTRA,
    ("engine.tools.mcp", "mcp.client.stdio"): EXTRA,
    (
        "engine.validate.semantic.routing",
        "re2",
    ): "RE2 loads only for flows with regex rules: validate stays fast",
    ("engine.validate.semantic.schedule", "engine.spec.cron"): CRONITER,
    (
        "engine.telemetry",
        "engine.telemetry.exporter",
    ): "OpenTelemetry's SDK (the otel extra) loads only once a run "
    "is traced, never for a command that runs nothing",
    (
        "engine.telemetry",
        "engine.telemetry.observer",
    ): "the span tree and its encoding load only for a yard that traces its runs",
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [str(node.module)]
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return [".".join([*base, *([node.module] if node.module else [])])]


def _imports_in_functions(
    node: ast.AST, inside: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function (at any depth) below `node`, in one walk of the tree."""
    for child in ast.iter_child_nodes(node):
        if inside and isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports_in_functions(
            child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        )


@functools.cache  # two tests read it: parse engine/ once
def function_level_imports() -> dict[tuple[str, str], list[int]]:
    """(module, imported module) -> the lines of every import statement inside a function of engine/."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        module = _module(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _imports_in_functions(tree):
            for imported in _imported(node, module, path.name == "__init__.py"):
                found.setdefault((module, imported), []).append(node.lineno)
    return found


def test_imports_inside_functions_are_only_the_allowed_ones() -> None:
    found = function_level_imports()
    unexpected = sorted(
        f"{module} imports {imported} in a function (line {lines[0]})"
        for (module, imported), lines in found.items()
        if (module, imported) not in ALLOWED
    )
    assert unexpected == [], "move these imports to the top of their module: " + "; ".join(
        unexpected
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert stale == [], (
        f"these imports are no longer inside a function: drop them from ALLOWED: {stale}"
    )


def test_every_allowed_import_inside_a_function_says_why() -> None:
    found = function_level_imports()
    silent = []
    for (module, imported), lines in found.items():
        path = ENGINE.parent / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = ENGINE.parent / module.replace(".", "/") / "__init__.py"
        text = path.read_text(encoding="utf-8").splitlines()
        for line in lines:
            nearby = text[max(0, line - 3) : line]  # the import's line and the two before it
            if (module, imported) in ALLOWED and not any("#" in row for row in nearby):
                silent.append(f"{module}:{line} ({imported})")
    assert silent == [], f"say why with a short comment at the import: {silent}"


def _layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.split("|")]


def test_every_part_of_the_engine_has_its_layer() -> None:
    parts = {
        f"engine.{path.stem}"
        for path in ENGINE.glob("*.py")
        if path.stem not in ("__init__", "__main__")
    }
    parts |= {f"engine.{path.parent.name}" for path in ENGINE.glob("*/__init__.py")}
    assert sorted(parts - set(_layers())) == [], (
        "give every package and module of engine/ its place in the "
        "layers of pyproject.toml (and docs/architecture.md)"
    )


def _cited(pattern: str) -> dict[str, list[str]]:
    """Every match of `pattern` in the code, tests, benchmarks and docs -> the files it is in."""
    found: dict[str, list[str]] = {}
    files = [
        *(REPO / "engine").rglob("*.py"),
        *(REPO / "tests").rglob("*.py"),
        *(REPO / "bench").rglob("*.py"),
        *(REPO / "docs").rglob("*.md"),
        REPO / "README.md",
    ]
    for path in files:
        for match in set(re.findall(pattern, path.read_text(encoding="utf-8"))):
            found.setdefault(match, []).append(str(path.relative_to(REPO)))
    return found


def test_the_repository_cites_only_its_own_documents() -> None:
    """Code and docs cite docs/ pages that exist, never a document outside the repository."""
    missing = {
        name: files
        for name, files in _cited(r"\bdocs/[\w-]+\.md\b").items()
        if not (REPO / name).is_file()
    }
    assert missing == {}, f"no such page: {missing}"
    outside = {
        name: files
        for name, files in _cited(r"\b[A-Z][A-Z0-9_]+\.md\b").items()
        if not (REPO / name).is_file()
    }
    assert outside == {}, (
        f"these documents are not in the repository; cite the docs/ page instead: {outside}"
    )
    sections = _cited(r"[A-Z][A-Z0-9_]+(?:\.md)? §")
    assert sections == {}, f"sections of documents outside the repository: {sections}"


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the checkout at `root`, not an installed engine
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_import_contracts_hold() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_import_against_the_layers_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(ENGINE, tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    report = tmp_path / "engine" / "validate" / "report.py"
    report.write_text(
        report.read_text(encoding="utf-8") + "\nfrom engine.runtime import engine as _engine\n",
        encoding="utf-8",
    )
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "engine.validate is not allowed to import engine.runtime" in result.stdout
    assert "engine.validate is not allowed to import langgraph" in result.stdout
