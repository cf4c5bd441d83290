"""POST /flows/{name}/runs with `durability` and `trace` (docs/serve.md): the run keeps what its
mode promises and says which it ran with; a mode the flow cannot run in is a 422 problem."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.serve.serve_helpers import GATED_FLOW, YARD, Live


def test_the_body_chooses_the_mode_and_gates_refuse_none(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard({**YARD, "flows/gated.yaml": GATED_FLOW})
    live = serve(root)
    with live.client() as client:
        quiet = client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}, "durability": "none", "trace": False}
        )
        default = client.post("/flows/add/runs", json={"inputs": {"a": 1}})
        refused = client.post("/flows/gated/runs", json={"durability": "none"})
        untraced = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "trace": False})
        unknown = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "durability": "fast"})
        quiet_run = client.get(f"/runs/{quiet.json()['run_id']}").json()
        default_run = client.get(f"/runs/{default.json()['run_id']}").json()
        quiet_events = client.get(
            f"/runs/{quiet.json()['run_id']}/events", headers={"Accept": "application/json"}
        ).json()
        listed = client.get("/runs").json()
    assert quiet.status_code == 200, quiet.text
    assert (quiet.json()["status"], quiet.json()["outputs"]) == ("finished", {"total": 3})
    run = quiet_run.get("run", quiet_run)
    assert (run["durability"], run["status"]) == ("none", "finished")
    assert default_run.get("run", default_run)["durability"] == "sync"
    assert quiet_events["events"] == []  # trace: false
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "flow 'gated' cannot run with durability none: step 'ask' is an approval gate" in message
    assert (
        untraced.status_code == 422
        and "only with durability none" in untraced.json()["error"]["message"]
    )
    assert unknown.status_code == 422
    runs = listed["runs"] if isinstance(listed, dict) else listed
    assert len(runs) == 2  # the refused requests started nothing
