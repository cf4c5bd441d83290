"""The yard's flows for LangGraph's own CLI and server: what `blockyard export langgraph` writes
(a `langgraph.json` and the small module its graphs point at) and what that module calls.

LangGraph's server imports a graph's module once per graph entry of `langgraph.json` and reads
the variable named after the colon from the module's namespace (a compiled graph, a StateGraph or
a factory). The module written here sets one variable per flow with `flow_graph`, which keeps one
`Yard` per yard folder in the process: the yard is loaded and validated once and each flow
compiled once, however many times the module runs.

`langgraph dev` stops at startup when any graph of `langgraph.json` fails to load (GraphLoadError), so
`flow_graph` never raises: a flow that cannot be built in the server's environment (a smart block
without the dspy extra, a yard that no longer loads) is served as a stand-in graph whose runs fail with
the reason, named once on stderr, and every other flow is served as usual. See docs/langgraph.md.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.runtime.yard import Yard

MODULE = "blockyard_graphs.py"  # written next to langgraph.json

_yards: dict[Path, Yard | Exception] = {}  # a yard that did not load keeps its error: said once
_unbuilt: dict[tuple[Path, str], CompiledStateGraph[Any, Any, Any, Any]] = {}
_lock = threading.RLock()


class _Anything(TypedDict, total=False):
    """A flow that cannot be built here: its runs fail saying why (docs/langgraph.md)."""


def flow_graph(root: Path | str, name: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Flow `name` of the yard at `root` as a standalone LangGraph graph (engine/runtime/standalone.py).
    Never raises: a flow that cannot be built here is a stand-in whose runs fail saying why, and a
    warning on stderr says so once (see the module's doc)."""
    path = Path(root).resolve()
    with _lock:
        stand_in = _unbuilt.get((path, name))
        if stand_in is not None:
            return stand_in
        try:
            yard = _yards.get(path)
            if yard is None:
                try:
                    yard = _yards[path] = Yard.load(path)
                except Exception as exc:
                    _yards[path] = exc
                    raise
            if isinstance(yard, Exception):
                raise yard
            return yard.compile(name)
        except Exception as exc:  # one flow must not keep the server from serving the others
            reason = build_failure(name, exc)
            sys.stderr.write(f"warning: blockyard: {reason} (its runs fail saying so)\n")
            stand_in = _unbuilt[(path, name)] = unavailable_graph(name, reason)
            return stand_in


def build_failure(name: str, exc: BaseException) -> str:
    """Why flow `name` cannot be served: `flow 'research' cannot be built here: ... pip install ...`."""
    detail = str(exc).strip() or type(exc).__name__
    return f"flow '{name}' cannot be built here: {detail}"


def unavailable_graph(name: str, reason: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A graph named `name` whose every run fails with UsageError(reason): it loads wherever LangGraph
    loads graphs, so the flows that can be built are served beside it."""

    def unavailable(state: _Anything) -> _Anything:
        raise UsageError(reason)

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(_Anything)
    builder.add_node("unavailable", unavailable)
    builder.add_edge(START, "unavailable")
    builder.add_edge("unavailable", END)
    return builder.compile(name=name)


def module_text(root: Path, folder: Path, flows: list[str]) -> str:
    """The module `langgraph.json` points at: a variable per flow, the yard found relative to it."""
    where = Path(os.path.relpath(root.resolve(), folder.resolve())).as_posix()
    return f'''"""The flows of a Blockyard yard as LangGraph graphs, for langgraph.json (docs/langgraph.md).

Written by `blockyard export langgraph`: run it again after adding, renaming or removing a flow.
The graphs are built from the yard's files when this module is imported, so edited flows need no
new export. A flow that cannot be built here (a missing extra) is a graph whose runs fail saying
why, with a warning on stderr; the other flows are served as usual.
"""

from pathlib import Path

from engine.runtime.exported import flow_graph

ROOT = (Path(__file__).resolve().parent / {where!r}).resolve()
FLOWS = {json.dumps(flows)}

for _name in FLOWS:  # flow names may hold "-": set through the namespace, read back by name
    globals()[_name] = flow_graph(ROOT, _name)
'''


def langgraph_config(flows: list[str], module: str = MODULE) -> JsonDict:
    """The `langgraph.json` of LangGraph's CLI: each flow a graph entry `./<module>:<flow>`."""
    return {"dependencies": ["."], "graphs": {name: f"./{module}:{name}" for name in flows}}


def export_langgraph(root: Path, output: Path) -> tuple[Path, list[str], list[str], dict[str, str]]:
    """Write `output` (langgraph.json) and the module beside it for every flow of the yard at `root`
    that validates; returns the module's path, the flows exported, the flows left out (with
    errors) and, of the exported flows, those that cannot be built in this environment (a missing
    extra), each with the reason: they are exported all the same (the server's environment may have
    what this one lacks; where it does not, the graph's runs fail with the reason). Nothing is
    written when no flow validates."""
    with Yard.load(root) as yard:
        names = sorted(yard.project.flows)
        if not names:
            raise UsageError(
                f"no flows in {root / yard.project.config.paths.flows}: nothing to export"
            )
        exported = [name for name in names if not yard.problems(name)]
        skipped = [name for name in names if name not in exported]
        if not exported:
            return output.parent / MODULE, exported, skipped, {}
        unbuilt: dict[str, str] = {}
        for name in exported:
            try:
                yard.compile(name)
            except Exception as exc:  # said as a warning: the flow is exported
                unbuilt[name] = build_failure(name, exc)
        module = _write(yard.root, output, exported)
    return module, exported, skipped, unbuilt


def _write(root: Path, output: Path, exported: list[str]) -> Path:
    folder = output.parent
    folder.mkdir(parents=True, exist_ok=True)
    module = folder / MODULE
    module.write_text(module_text(root, folder, exported), encoding="utf-8")
    output.write_text(json.dumps(langgraph_config(exported), indent=2) + "\n", encoding="utf-8")
    return module
