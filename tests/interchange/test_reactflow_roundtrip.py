"""Every flow of the example yard exported as a React Flow graph and imported back is the same flow:
the same graph model (engine/compile/flowgraph.py) and, run offline on the mock model, the same
outputs on the same inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from engine.compile.draw import as_json
from engine.compile.flowgraph import flow_graph
from engine.definitions.project import load_project
from engine.runtime.yard import Yard
from engine.spec import TypeSpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FLOWS = sorted(
    p.stem for p in (REPO / "flows").glob("*.yaml") if not p.name.endswith(".test.yaml")
)


def copy_yard(target: Path) -> Path:
    target.mkdir()
    for name in ("blockyard.yaml",):
        shutil.copy(REPO / name, target / name)
    for folder in ("blocks", "flows", "prompts", "tools"):
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, target / folder)
    return target


def normal(graph: dict[str, Any]) -> dict[str, Any]:
    """The graph model without what only says where a definition was written (edge ids, order)."""
    nodes = {n["id"]: {k: v for k, v in n.items() if k != "id"} for n in graph["nodes"]}
    edges = sorted(
        (e["source"], e["target"], e["kind"], e["label"] or "", e["handle"] or "", e["bound"] or 0)
        for e in graph["edges"]
    )
    groups = sorted(json.dumps(g, sort_keys=True) for g in graph["groups"])
    return {"nodes": nodes, "edges": edges, "groups": groups}


def sample(spec: TypeSpec) -> Any:
    if spec.has_default:
        return spec.default
    if spec.enum:
        return spec.enum[0]
    return {
        "string": "ada",
        "integer": 2,
        "number": 1.5,
        "boolean": True,
        "array": ["Bees dance to share where flowers are.", "A colony has one queen."],
        "object": {},
    }.get(spec.type, "sample")


def run(root: Path, flow: str) -> tuple[str, dict[str, Any] | None]:
    with Yard.load(root, state=root / "state.db") as yard:
        bundle = yard.bundle(flow)
        inputs = {
            name: sample(spec) for name, spec in bundle.flow.inputs.items() if not spec.has_default
        }
        result = yard.run(flow, inputs)
        return str(result.status), result.outputs


@pytest.mark.parametrize("flow", EXAMPLE_FLOWS)
def test_export_then_import_gives_back_the_same_flow(
    flow: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = copy_yard(tmp_path / "original")
    with Yard.load(original) as yard:
        bundle = yard.bundle(flow)
        before = normal(as_json(flow_graph(bundle)))
    graph = tmp_path / f"{flow}.json"
    assert main(["export", "reactflow", flow, "--root", str(original), "--output", str(graph)]) == 0

    imported = copy_yard(tmp_path / "imported")
    (imported / "flows" / f"{flow}.yaml").unlink()
    blocks_before = sorted(p.name for p in (imported / "blocks").iterdir())
    assert main(["import", "reactflow", str(graph), "--root", str(imported)]) == 0, (
        capsys.readouterr().err
    )
    # every step runs a block of the yard: nothing new was written next to them
    assert sorted(p.name for p in (imported / "blocks").iterdir()) == blocks_before
    assert load_project(imported).flows[flow].doc.path == imported / "flows" / f"{flow}.yaml"

    with Yard.load(imported) as yard:
        after = normal(as_json(flow_graph(yard.bundle(flow))))
    assert after == before
    assert run(imported, flow) == run(original, flow)
