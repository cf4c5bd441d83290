"""The graph the server gives the web page is the engine's graph model as JSON (engine/compile/draw.py,
`as_json`), over real HTTP: nothing is drawn as Mermaid text and read back."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from engine.compile.draw import as_json, mermaid
from engine.compile.flowgraph import flow_graph
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from tests.serve.serve_helpers import Live, wait_run

ROUTED = """
flow: routed
inputs:
  a: {type: integer}
outputs: [total]
steps:
  - id: pick
    router:
      value: "{{ inputs.a }}"
      routes:
        - {equals: "1", goto: one}
      default: other
  - {id: one, uses: adder, with: {x: 1, y: 1}, goto: end}
  - {id: other, uses: adder, with: {x: 2, y: 2}}
"""


def test_a_flow_s_graph_is_the_model_as_json(yard: Path, serve: Callable[..., Live]) -> None:
    (yard / "flows" / "routed.yaml").write_text(ROUTED, encoding="utf-8")
    graph = flow_graph(make_bundle(load_project(yard), "routed"))
    live = serve(yard, watch=False, schedules=False)
    with live.client() as client:
        detail = client.get("/flows/routed").json()
        assert detail["graph_error"] is None
        served = detail["graph"]
        assert served == {**as_json(graph), "mermaid": mermaid(graph)}
        pick = next(node for node in served["nodes"] if node["id"] == "pick")
        assert (pick["kind"], pick["shape"], [h["id"] for h in pick["handles"]]) == (
            "router",
            "diamond",
            ["route-1", "default"],
        )
        assert [
            (e["source"], e["target"], e["kind"], e["handle"])
            for e in served["edges"]
            if e["source"] == "pick"
        ] == [("pick", "one", "route", "route-1"), ("pick", "other", "default", "default")]
        run_id = client.post("/flows/routed/runs", json={"inputs": {"a": 1}}).json()["run_id"]
        wait_run(client, run_id)
        # the run's pinned definition
        assert client.get(f"/runs/{run_id}").json()["graph"] == served


def test_the_server_no_longer_reads_mermaid_back() -> None:
    assert importlib.util.find_spec("engine.serve.graph") is None
