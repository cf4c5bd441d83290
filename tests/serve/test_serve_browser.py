"""The web page in a real headless browser: Debian's headless Chromium driven by Playwright
(which binary, and why: tests/support/chromium.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import EventType
from tests.serve.serve_helpers import ADD_FLOW, GATED_FLOW, YARD, Live, start_gated_run
from tests.support.coder_yard import CODER_YARD
from tests.support.example import copy_example_yard

REPO = Path(__file__).resolve().parents[2]


def test_start_a_run_and_see_its_result(yard: Path, serve: Callable[..., Live], page: Any) -> None:
    live = serve(yard, schedules=False)
    page.goto(live.url + "/")
    page.locator("#flow-list [data-flow=add]").click()
    page.locator("#flow-title").filter(has_text="add v1").wait_for()
    graph = page.locator("#flow-graph svg, #flow-graph p")
    graph.first.wait_for()
    page.fill("#input-a", "3")
    page.click("#run-button")
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-outputs").filter(has_text='"total": 5').wait_for()
    events = page.locator("#run-events li")
    events.filter(has_text="run_finished").wait_for()
    assert events.first.get_attribute("data-type") == "run_started"
    # the new run is listed with its status
    page.locator("#run-table tbody tr [data-status=finished]").first.wait_for()
    assert page.url.endswith(
        "#run/" + page.locator("#run-table tbody tr").first.get_attribute("data-run")
    )


def test_a_bad_input_is_shown_and_nothing_runs(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    live = serve(yard, watch=False, schedules=False)
    page.goto(live.url + "/#flow/add")
    page.locator("#flow-title").filter(has_text="add v1").wait_for()
    page.click("#run-button")  # `a` is required and left empty
    message = page.locator("#run-form-error")
    message.filter(has_text="a").wait_for()
    assert "'a'" in message.inner_text()


def test_the_diagnostics_banner_shows_a_broken_edit(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    live = serve(yard, schedules=False)
    page.goto(live.url + "/")
    page.locator("#flow-list [data-flow=add]").wait_for()
    assert page.locator("#diagnostics").is_hidden()
    (yard / "flows/add.yaml").write_text(
        ADD_FLOW.replace("version: 1", "version: 2") + "bogus: 1\n"
    )
    page.locator("#diagnostics-list li").filter(has_text="flows/add.yaml").wait_for()
    assert "still serving the last good version of: add" in page.inner_text("#diagnostics-title")
    page.locator("#flow-list [data-flow=add] .stale").wait_for()


def test_a_token_is_asked_for_and_used(yard: Path, serve: Callable[..., Live], page: Any) -> None:
    live = serve(yard, watch=False, schedules=False, token="s3cret")
    page.goto(live.url + "/")
    page.locator("#token-form").wait_for()
    page.fill("#token-input", "s3cret")
    page.click("#token-form button")
    page.locator("#flow-list [data-flow=add]").wait_for()
    assert page.locator("#token-form").is_hidden()


def test_a_refresh_that_changes_nothing_keeps_the_rows_under_the_pointer(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    # The page asks the server again every two seconds. Rows replaced by a refresh that changed
    # nothing lost a click whose press and release straddled it: the browser sends that click to the
    # list, and nothing opened (a flaky test found it under load).
    live = serve(yard, watch=False, schedules=False)
    page.goto(live.url + "/")
    row = page.locator("#flow-list [data-flow=add]").element_handle()
    for _ in range(2):  # the next refresh's request, then the one after: the first has been drawn
        with page.expect_request(lambda request: request.url.endswith("/diagnostics")):
            pass
    assert row.evaluate("node => node.isConnected")
    row.click()
    page.locator("#flow-title").filter(has_text="add v1").wait_for()


def test_approve_a_gate_and_see_the_result(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], page: Any
) -> None:
    root = make_yard({**YARD, "flows/gated.yaml": GATED_FLOW})
    live = serve(root, schedules=False)
    with live.client() as client:
        start_gated_run(client)
    page.goto(live.url + "/")
    page.locator("#flow-list [data-flow=gated]").click()
    page.click("#run-button")
    page.locator("#run-status [data-status=waiting]").wait_for()
    gate = page.locator("#run-approvals form.gate")
    gate.filter(has_text="Add how much?").wait_for()
    assert page.locator("#approval-list [data-approval]").count() >= 1
    gate.locator("[data-field=b]").fill("41")
    gate.locator("[data-reason]").fill("looks right")
    gate.locator("[data-action=approve]").click()
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-outputs").filter(has_text='"total": 42').wait_for()


def test_an_agents_tool_call_is_decided_with_its_allowed_decisions(
    tmp_path: Path, serve: Callable[..., Live], page: Any
) -> None:
    copy_example_yard(tmp_path)  # note_keeper: its agent's write_file waits for a person
    live = serve(tmp_path, watch=False, schedules=False)
    page.goto(live.url + "/#flow/note_keeper")
    page.locator("#flow-title").filter(has_text="note_keeper v1").wait_for()
    page.locator("[data-field=message]").first.fill("Remember to buy milk")
    page.click("#run-button")
    page.locator("#run-status [data-status=waiting]").wait_for()
    gate = page.locator("#run-approvals form.gate[data-gate='keep:write_file']")
    gate.filter(has_text="Tool call needs approval").wait_for()
    assert "allowed: approve, edit, reject" in gate.inner_text()
    # the call's arguments are the fields: changing one is an edit
    gate.locator("[data-field=path]").fill("web.md")
    gate.locator("[data-action=approve]").click()
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-outputs").filter(has_text="Saved.").wait_for()
    with live.client() as client:
        (run,) = client.get("/runs", params={"flow": "note_keeper"}).json()["runs"]
        trace = client.get(
            f"/runs/{run['id']}/events", headers={"Accept": "application/json"}
        ).json()
    written = [e["data"]["path"] for e in trace["events"] if e["type"] == "file_written"]
    assert written == ["web.md"]


def test_the_page_draws_the_graph_model(yard: Path, serve: Callable[..., Live], page: Any) -> None:
    live = serve(yard, watch=False, schedules=False)
    page.goto(live.url + "/#flow/add")
    step = page.locator("#flow-graph svg g.node.kind-step[data-node=sum]")
    step.wait_for()
    assert "transform adder" in (step.text_content() or "")
    assert (
        page.locator("#flow-graph svg g.node.kind-start.terminal[data-node=__start__]").count() == 1
    )
    assert page.locator("#flow-graph svg path.edge.solid").count() == 2  # start -> sum -> end


def test_a_conversation_streams_its_replies_and_shows_its_name(
    tmp_path: Path, serve: Callable[..., Live], page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_example_yard(tmp_path)  # the example yard: support_chat on its scripted mock model
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(tmp_path, watch=False, schedules=False)
    page.goto(live.url + "/#flow/support_chat")
    page.locator("#flow-title").filter(has_text="support_chat v1").wait_for()
    page.click("#chat-start")
    page.locator("#chat-detail").wait_for()
    thread_id = page.url.rsplit("#thread/", 1)[1]
    assert page.inner_text("#chat-title") == thread_id  # no name before the first turn
    messages = page.locator("#chat-messages li")
    greeting = "Thanks for writing to ACME support. How can I help you today?"
    for index, (said, answer) in enumerate(
        (
            ("My name is Ada", greeting),
            ("My order 123 is late", greeting),
            ("What is my name?", "Your name is Ada."),
        )
    ):
        page.fill("#chat-input", said)
        page.click("#chat-send")
        reply = page.locator(f"#chat-messages li.assistant[data-index='{2 * index + 1}']")
        reply.filter(has_text=answer).wait_for()
        # the reply came in as token events, one per word of the mock's answer, before `complete`
        assert reply.get_attribute("data-tokens") == str(len(answer.split()))
        if index == 0:  # the name arrives with the first turn's thread_name event
            page.locator("#chat-title[data-named]").filter(has_text="My name is Ada").wait_for()
    assert messages.count() == 6
    assert page.locator("#chat-messages li.user").nth(2).inner_text() == "What is my name?"
    # listed by its name; opening it again reads the history from the server
    page.locator(f"#thread-list [data-thread='{thread_id}']").filter(
        has_text="My name is Ada"
    ).wait_for()
    page.goto(live.url + "/")
    page.locator(f"#thread-list [data-thread='{thread_id}']").click()
    page.locator("#chat-messages li.assistant[data-index='5']").filter(
        has_text="Your name is Ada."
    ).wait_for()
    assert messages.count() == 6 and page.inner_text("#chat-title") == "My name is Ada"
    trace = page.locator("#chat-messages li.assistant[data-index='5'] a.trace")
    trace.click()
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-outputs").filter(has_text="Your name is Ada.").wait_for()


def test_the_page_draws_the_react_flow_graph_of_the_flow_and_of_a_run(
    tmp_path: Path, serve: Callable[..., Live], page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in (
        "blocks",
        "flows",
        "prompts",
    ):  # the example yard: write_article has a loop, a decide step, an exit
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copy(REPO / "blockyard.yaml", tmp_path / "blockyard.yaml")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    live = serve(tmp_path, watch=False, schedules=False)
    with live.client() as client:
        graph = client.get("/flows/write_article", params={"format": "reactflow"}).json()
    page.goto(live.url + "/#flow/write_article")
    page.locator("#flow-graph svg g.node[data-node=verdict]").wait_for()
    svg = "#flow-graph svg"
    nodes = page.eval_on_selector_all(
        f"{svg} g.node", "els => els.map(e => [e.dataset.node, e.getAttribute('transform')])"
    )
    # every node of the React Flow graph is drawn, with the start and end terminals the page adds
    assert {node for node, _ in nodes} == {n["id"] for n in graph["nodes"]} | {
        "__start__",
        "__end__",
    }
    # where the export's layout put them: a node lower in the layout is drawn lower
    drawn_y = {node: float(where.split(",")[1].rstrip(")")) for node, where in nodes}
    for a in graph["nodes"]:
        for b in graph["nodes"]:
            if a["position"]["y"] < b["position"]["y"]:
                assert drawn_y[a["id"]] < drawn_y[b["id"]], (a["id"], b["id"])
    # every edge, with its handle, its label and its style (the exit after 2 visits is dashed)
    edges = page.eval_on_selector_all(
        f"{svg} path.edge[data-edge]",
        "els => els.map(e => [e.dataset.edge, "
        "e.getAttribute('data-handle'), e.classList.contains('dashed')])",
    )
    assert sorted(map(tuple, edges)) == sorted(
        (e["id"], e.get("sourceHandle"), "style" in e) for e in graph["edges"]
    )
    assert any(dashed for _, handle, dashed in edges if handle == "max_visits")
    labels = set(
        page.eval_on_selector_all(f"{svg} text.edge-label", "els => els.map(e => e.textContent)")
    )
    assert labels == {e["label"] for e in graph["edges"] if e.get("label")}
    assert page.locator(f"{svg} g.node.kind-decide.type-block[data-node=verdict]").count() == 1
    assert page.locator(f"{svg} g.group[data-group=review_cycle__cluster]").count() == 1
    # a run's graph: its steps light up as their events arrive
    page.goto(live.url + "/#flow/hello")
    page.locator("#flow-title").filter(has_text="hello v1").wait_for()
    page.click("#run-button")
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-graph svg g.node.s-finished[data-node=shout]").wait_for()
    assert page.locator("#run-graph svg g.node.s-finished[data-node=greet]").count() == 1


def test_a_custom_event_is_told_from_the_engines_by_the_servers_list(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], page: Any
) -> None:
    """The run view marks a step's own event (`emit:`) as custom and shows its data; the engine's events —
    `file_written` too, which a list kept by the page once lacked — are not custom: the page asks the server
    which types are the engine's (GET /vocabulary)."""
    emitting = """
        flow: code
        output_dir: output
        outputs: [done]
        steps:
          - id: write
            uses: coder
            with: {path: app.py}
            emit: {event: shipped, data: {done: "{{ context.done }}"}}
    """
    live = serve(
        make_yard({**CODER_YARD, "flows/code.yaml": emitting}), watch=False, schedules=False
    )
    page.goto(live.url + "/#flow/code")
    page.locator("#flow-title").filter(has_text="code v1").wait_for()
    page.click("#run-button")
    page.locator("#run-status [data-status=finished]").wait_for()
    page.locator("#run-events li[data-type=run_finished]").wait_for()
    custom = page.locator("#run-events li.custom")
    assert [item.get_attribute("data-type") for item in custom.all()] == ["shipped"]
    assert custom.first.inner_text().endswith('{"done":true}')
    written = page.locator("#run-events li[data-type=file_written]")
    assert sorted(item.inner_text() for item in written.all()) == [
        "file_written write wrote app.py (12 bytes)",
        "file_written write wrote lib/util.py (6 bytes)",
    ]
    shown = set(
        page.locator("#run-events li:not(.custom)").evaluate_all(
            "items => items.map(i => i.dataset.type)"
        )
    )
    assert {"run_started", "step_started", "step_finished", "file_written", "model_call"} <= shown
    assert shown <= {kind.value for kind in EventType}
