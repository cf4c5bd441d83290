"""The HTTP API end to end, over real HTTP on 127.0.0.1: flows, runs, errors, docs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.serve.serve_helpers import Live, wait_run


@pytest.fixture
def live(yard: Path, serve: Callable[..., Live]) -> Live:
    return serve(yard, watch=False, schedules=False)


def test_health_and_flows(live: Live) -> None:
    with live.client() as client:
        health = client.get("/healthz").json()
        assert health == {
            "status": "ok",
            "generation": 1,
            "flows": 2,
            "running": 0,
            "queued": 0,
            "max_concurrent_runs": 32,
        }
        flows = client.get("/flows").json()["flows"]
        assert [f["name"] for f in flows] == ["add", "slow"]
        add = flows[0]
        assert (add["version"], add["description"], add["file"], add["stale"]) == (
            1,
            "Add a and b.",
            "flows/add.yaml",
            False,
        )
        assert add["inputs"] == {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}}
        assert add["outputs"] == ["total"] and add["schedule"] is None
        detail = client.get("/flows/add").json()
        assert detail["definition"]["flow"] == "add"
        assert "graph" in detail and "graph_error" in detail


def test_a_run_answers_with_its_result(live: Live) -> None:
    with live.client() as client:
        response = client.post("/flows/add/runs", json={"inputs": {"a": 3}})
        assert response.status_code == 200
        result = response.json()
        assert (result["status"], result["outputs"], result["flow"], result["version"]) == (
            "finished",
            {"total": 5},
            "add",
            1,
        )
        run = client.get(f"/runs/{result['run_id']}").json()
        assert (run["status"], run["inputs"], run["outputs"]) == (
            "finished",
            {"a": 3, "b": 2},
            {"total": 5},
        )
        listed = client.get("/runs", params={"flow": "add"}).json()["runs"]
        assert [r["id"] for r in listed] == [result["run_id"]]
        assert client.get("/runs", params={"flow": "slow"}).json()["runs"] == []
        assert client.get("/runs", params={"status": "failed"}).json()["runs"] == []


def test_runs_are_listed_by_start_time_whatever_their_ids(live: Live) -> None:
    with live.client() as client:
        ids = []
        for run_id in ("zz-oldest", None, "00-newest"):
            body = {"inputs": {"a": 1}, **({"run_id": run_id} if run_id else {})}
            ids.append(client.post("/flows/add/runs", json=body).json()["run_id"])
            time.sleep(0.002)  # start times have milliseconds: three runs, three times
        assert [r["id"] for r in client.get("/runs").json()["runs"]] == ids[::-1]
        assert [r["id"] for r in client.get("/runs", params={"limit": 1}).json()["runs"]] == [
            "00-newest"
        ]


def test_a_chosen_run_id_is_used_once(live: Live) -> None:
    with live.client() as client:
        first = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "run_id": "nightly-1"})
        assert first.json()["run_id"] == "nightly-1"
        again = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "run_id": "nightly-1"})
        assert again.status_code == 409
        assert again.json() == {
            "error": {"code": "run_exists", "message": "run id 'nightly-1' is already taken"}
        }
        bad = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "run_id": "no spaces"})
        assert bad.status_code == 422
        assert "invalid run id 'no spaces'" in bad.json()["error"]["message"]


def test_in_the_background_with_wait_false(live: Live) -> None:
    with live.client() as client:
        response = client.post("/flows/slow/runs?wait=false", json={"inputs": {"a": 5}})
        assert response.status_code == 202
        accepted = response.json()
        assert accepted["status"] in ("queued", "running")
        assert accepted["links"] == {
            "run": f"/runs/{accepted['run_id']}",
            "events": f"/runs/{accepted['run_id']}/events",
        }
        run = wait_run(client, accepted["run_id"])
        assert (run["status"], run["outputs"]) == ("finished", {"total": 15})


@pytest.mark.parametrize(
    ("request_kwargs", "status", "code", "message"),
    [
        (
            {"json": {"inputs": {"a": "x"}}},
            422,
            "invalid_request",
            "flow 'add': input 'a' must be an integer",
        ),
        ({"json": {"inputs": {}}}, 422, "invalid_request", "'a'"),
        ({"json": {"inputs": {"a": 1, "c": 2}}}, 422, "invalid_request", "'c'"),
        (
            {"json": {"inputs": {"a": 1}, "extra": 1}},
            422,
            "invalid_request",
            "body.extra: Extra inputs are not permitted",
        ),
        (
            {"json": {"inputs": [1, 2]}},
            422,
            "invalid_request",
            "body.inputs: Input should be a valid dictionary",
        ),
        ({"json": [1, 2]}, 422, "invalid_request", "the request body must be a JSON object"),
        (
            {"content": b'{"inputs": {', "headers": {"Content-Type": "application/json"}},
            400,
            "malformed_json",
            "the request body is not valid JSON",
        ),
        (
            {"content": b"a=1", "headers": {"Content-Type": "text/plain"}},
            422,
            "invalid_request",
            "the request body must be a JSON object",
        ),
    ],
)
def test_bad_run_requests_get_a_clear_4xx(
    live: Live, request_kwargs: dict[str, object], status: int, code: str, message: str
) -> None:
    with live.client() as client:
        response = client.post("/flows/add/runs", **request_kwargs)  # type: ignore[arg-type]
        assert response.status_code == status
        error = response.json()["error"]
        assert error["code"] == code
        assert message in error["message"]
        assert client.get("/runs").json()["runs"] == []  # nothing was started


def test_unknown_things_are_404_with_a_hint(live: Live) -> None:
    with live.client() as client:
        response = client.post("/flows/ad/runs", json={"inputs": {}})
        assert response.status_code == 404
        assert response.json() == {
            "error": {"code": "unknown_flow", "message": "unknown flow 'ad' (did you mean 'add'?)"}
        }
        assert client.get("/flows/nope").status_code == 404
        assert client.get("/runs/nope").json() == {
            "error": {"code": "unknown_run", "message": "unknown run 'nope'"}
        }
        assert client.get("/runs/nope/events").status_code == 404
        assert client.post("/runs/nope/resume", json={"approve": True}).status_code == 404
        missing = client.get("/no/such/route")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
        wrong = client.delete("/flows")
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")
        assert client.get("/runs", params={"status": "sleeping"}).status_code == 422
        assert client.get("/runs", params={"limit": 0}).status_code == 422


def test_decisions_on_runs_that_are_not_waiting_are_conflicts(live: Live) -> None:
    with live.client() as client:
        run_id = client.post("/flows/add/runs", json={"inputs": {"a": 1}}).json()["run_id"]
        decided = client.post(f"/runs/{run_id}/resume", json={"approve": True})
        assert decided.status_code == 409
        assert decided.json() == {
            "error": {
                "code": "not_waiting",
                "message": f"run {run_id} is finished, not waiting for an approval decision",
            }
        }
        again = client.post(f"/runs/{run_id}/resume", json={})
        assert (again.status_code, again.json()["error"]["code"]) == (409, "not_resumable")
        loose = client.post(f"/runs/{run_id}/resume", json={"values": {"x": 1}})
        assert loose.status_code == 422
        assert 'add "decision": "approve" or "reject"' in loose.json()["error"]["message"]
        typed = client.post(f"/runs/{run_id}/resume", json={"approve": "maybe"})
        assert typed.status_code == 422


def test_openapi_docs_and_the_page_are_served(live: Live) -> None:
    with live.client() as client:
        docs = client.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        spec = client.get("/openapi.json").json()
        assert {
            "/healthz",
            "/flows",
            "/flows/{name}",
            "/flows/{name}/runs",
            "/runs",
            "/runs/{run_id}",
            "/runs/{run_id}/events",
            "/runs/{run_id}/resume",
            "/diagnostics",
        } <= set(spec["paths"])
        page = client.get("/")
        assert page.status_code == 200 and "<title>Blockyard</title>" in page.text
        for asset in ("app.js", "api.js", "graph.js", "forms.js", "style.css"):
            assert client.get(f"/static/{asset}").status_code == 200
        # everything the page loads is local: no http(s) URLs in the page or its scripts
        for text in [
            page.text,
            *(client.get(f"/static/{a}").text for a in ("app.js", "api.js", "graph.js")),
        ]:
            assert "https://" not in text and "http://" not in text.replace(
                "http://www.w3.org/2000/svg", ""
            )


def test_diagnostics_of_a_clean_yard(live: Live) -> None:
    with live.client() as client:
        report = client.get("/diagnostics").json()
        assert report["ok"] is True and report["diagnostics"] == [] and report["stale"] == {}
        assert report["generation"] == 1 and report["reload_error"] is None
