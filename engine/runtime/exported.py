"""The yard's flows for LangGraph's own CLI and server: what `blockyard export langgraph` writes
(a `langgraph.json` and the small module its graphs point at) and what that module calls.

LangGraph's server imports a graph's module once per graph entry of `langgraph.json` and reads
the variable named after the colon from the module's namespace (a compiled graph, a StateGraph or
a factory). The module written here sets one variable per flow with `flow_graph`, which keeps one
`Yard` per yard folder in the process: the yard is loaded and validated once and each flow
compiled once, however many times the module runs. See docs/langgraph.md.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from engine.errors import UsageError
from engine.runtime.yard import Yard

MODULE = "blockyard_graphs.py"  # written next to langgraph.json

_yards: dict[Path, Yard] = {}
_lock = threading.Lock()


def flow_graph(root: Path | str, name: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Flow `name` of the yard at `root` as a standalone LangGraph graph (engine/runtime/standalone.py);
    ValidationFailed when the flow does not validate."""
    path = Path(root).resolve()
    with _lock:
        yard = _yards.get(path)
        if yard is None:
            yard = _yards[path] = Yard.load(path)
    return yard.compile(name)


def module_text(root: Path, folder: Path, flows: list[str]) -> str:
    """The module `langgraph.json` points at: a variable per flow, the yard found relative to it."""
    where = Path(os.path.relpath(root.resolve(), folder.resolve())).as_posix()
    return f'''"""The flows of a Blockyard yard as LangGraph graphs, for langgraph.json (docs/langgraph.md).

Written by `blockyard export langgraph`: run it again after adding, renaming or removing a flow.
The graphs are built from the yard's files when this module is imported, so edited flows need no
new export.
"""

from pathlib import Path

from engine.runtime.exported import flow_graph

ROOT = (Path(__file__).resolve().parent / {where!r}).resolve()
FLOWS = {json.dumps(flows)}

for _name in FLOWS:  # flow names may hold "-": set through the namespace, read back by name
    globals()[_name] = flow_graph(ROOT, _name)
'''


def langgraph_config(flows: list[str], module: str = MODULE) -> dict[str, Any]:
    """The `langgraph.json` of LangGraph's CLI: each flow a graph entry `./<module>:<flow>`."""
    return {"dependencies": ["."], "graphs": {name: f"./{module}:{name}" for name in flows}}


def export_langgraph(root: Path, output: Path) -> tuple[Path, list[str], list[str]]:
    """Write `output` (langgraph.json) and the module beside it for every flow of the yard at `root`
    that validates; returns the module's path, the flows exported and the flows left out (with
    errors). Nothing is written when no flow validates."""
    with Yard.load(root) as yard:
        names = sorted(yard.project.flows)
        if not names:
            raise UsageError(f"no flows in {root / yard.project.config.paths.flows}: nothing to export")
        exported = [name for name in names if not yard.problems(name)]
        skipped = [name for name in names if name not in exported]
        if not exported:
            return output.parent / MODULE, exported, skipped
        module = _write(yard.root, output, exported)
    return module, exported, skipped


def _write(root: Path, output: Path, exported: list[str]) -> Path:
    folder = output.parent
    folder.mkdir(parents=True, exist_ok=True)
    module = folder / MODULE
    module.write_text(module_text(root, folder, exported), encoding="utf-8")
    output.write_text(json.dumps(langgraph_config(exported), indent=2) + "\n", encoding="utf-8")
    return module
