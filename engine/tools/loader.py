"""Python tools declared in blockyard.yaml (`tools: {name: {import: "module:function"}}`).

A tool's module must come from the yard's own code folder (config.paths.code, put first on
sys.path) or from an installed distribution; a module that resolves anywhere else (the current
directory, a stray sys.path entry) is refused, so a yard always runs the code it ships. A module
file of the code folder that links outside it is refused before it is imported (tools/location.py).
Modules of the code folder are imported afresh on every load, so a hot reload sees edits, and always
compiled from their source (`_FromSource`): never from a cached .pyc, which Python trusts when the
source's modification time (in whole seconds) and size are unchanged — an edit within the second that
keeps the file's size would reload the old code — and without writing a __pycache__ into the yard.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import packages_distributions
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.core.diagnostics import did_you_mean
from engine.spec import ConfigSpec, ToolDecl
from engine.tools.errors import ToolError
from engine.tools.location import module_problem
from engine.tools.names import BUILTIN_TOOLS
from engine.tools.signature import describe, summary
from engine.tools.tool import Tool

_IMPORT_LOCK = threading.Lock()  # sys.path and sys.modules are process-wide


def load_python_tools(config: ConfigSpec, root: Path) -> list[Tool]:
    """Every tool of config.tools, loaded; the first failure is a ToolError naming tool and path."""
    if not config.tools:
        return []
    code = (root / config.paths.code).resolve()
    fresh: set[str] = set()
    tools = []
    for name, decl in config.tools.items():
        # before anything is imported (importing runs the module): no module file may lead out of the yard
        problem = module_problem(decl.import_.partition(":")[0], root, config.paths.code)
        if problem is not None:
            raise ToolError(f"tool '{name}': {problem}")
        tools.append(load_tool(name, decl, code, fresh))
    return tools


def load_tool(name: str, decl: ToolDecl, code: Path, fresh: set[str] | None = None) -> Tool:
    """One declared tool; `fresh` holds the yard modules already re-imported during this load."""
    if name in BUILTIN_TOOLS:
        raise ToolError(
            f"tool '{name}' in blockyard.yaml has the name of a built-in tool; rename it"
        )
    module_name, _, attribute = decl.import_.partition(":")
    module = _import(name, module_name, code, set() if fresh is None else fresh)
    func = getattr(module, attribute, None)
    if func is None:
        public = [n for n in vars(module) if not n.startswith("_")]
        raise ToolError(
            f"tool '{name}': module '{module_name}' ({_where(module)}) has no '{attribute}'"
            f"{did_you_mean(attribute, public)}"
        )
    if not callable(func):
        raise ToolError(f"tool '{name}': '{decl.import_}' is not a function")
    if decl.parameters is None:
        parameters, doc = describe(func, name)
    else:
        # jsonschema (~60 ms to import) only for a tool whose `parameters` blockyard.yaml writes: a cold start
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(decl.parameters)
        except SchemaError as exc:
            raise ToolError(
                f"tool '{name}': `parameters` in blockyard.yaml is not a valid JSON Schema: "
                f"{exc.message}"
            ) from None
        parameters, doc = decl.parameters, summary(func)
    return Tool(
        name=name, description=decl.description or doc or name, parameters=parameters, func=func
    )


def _import(tool: str, module_name: str, code: Path, fresh: set[str]) -> ModuleType:
    top = module_name.split(".")[0]
    with _IMPORT_LOCK:
        in_yard = (
            code.is_dir() and importlib.machinery.PathFinder.find_spec(top, [str(code)]) is not None
        )
        if in_yard:
            _put_first_on_path(code)
            if top not in fresh:
                _forget(top)
                fresh.add(top)
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ToolError(
                f"tool '{tool}': cannot import '{module_name}' from the yard's code folder {code} "
                f"or installed packages: {_explain(exc)}"
            ) from None
    if not (_inside(module, code) or top in _installed()):
        raise ToolError(
            f"tool '{tool}': module '{module_name}' was found at {_where(module)}, which is neither "
            f"in the yard's code folder {code} nor an installed package"
        )
    return module


def _put_first_on_path(code: Path) -> None:
    entry = str(code)
    if sys.path[:1] != [entry]:
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    if not isinstance(sys.path_importer_cache.get(entry), _CodeFinder):
        sys.path_importer_cache[entry] = _CodeFinder(entry)
    importlib.invalidate_caches()


class _FromSource(importlib.machinery.SourceFileLoader):
    """Compiles a module of the yard's code folder from its source, every time it is imported."""

    def path_stats(self, path: str) -> Mapping[str, Any]:
        # without the source's stats, the import system neither reads nor writes the module's .pyc
        raise OSError("the yard's code is compiled from its source")


class _CodeFinder(importlib.machinery.FileFinder):
    """The finder of the code folder's sys.path entry: source modules and packages through
    `_FromSource`, extension modules as usual, no sourceless .pyc files."""

    def __init__(self, path: str) -> None:
        super().__init__(
            path,
            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
            (_FromSource, importlib.machinery.SOURCE_SUFFIXES),
        )


def _forget(top: str) -> None:
    for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        del sys.modules[loaded]


def _inside(module: ModuleType, code: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    return Path(file).resolve().is_relative_to(code)


@lru_cache(maxsize=1)
def _installed() -> frozenset[str]:
    return frozenset(packages_distributions())


def _where(module: ModuleType) -> str:
    return str(getattr(module, "__file__", None) or "a built-in module")


def _explain(exc: Exception) -> str:
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}:{exc.offset or 0}: syntax error: {exc.msg}"
    if isinstance(exc, ModuleNotFoundError):
        return f"no module named '{exc.name}'"
    return f"{type(exc).__name__}: {exc}"
