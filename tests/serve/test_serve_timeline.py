"""The web page's run timeline and the runs list's cost, in a real headless chromium (docs/serve.md,
"The web page"; docs/observability.md, "Seeing it").

The first tests hand the page's own timeline module (engine/serve/web/timeline.js, served by a real
server) events written here — every kind of row, a hostile step name; the last ones follow real runs
of flows on the engine's `mock` model, whose model calls have deterministic token counts, and compare
what the page shows with the run's trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.usage import Spend, money
from tests.serve.serve_helpers import GATED_FLOW, YARD, Live, start_gated_run
from tests.support.openai_stub import OpenAIStub, Reply

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
HOSTILE = '<img src=x onerror="window.pwned=1">'


def at(ms: int) -> str:
    return (
        (T0 + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def call(
    ms: int, latency: int, tokens: tuple[int, int], cost: float | None, **extra: Any
) -> dict[str, Any]:
    return {
        "block": "b",
        "purpose": "block",
        "provider": "mock",
        "model": "mock-1",
        "profile": "default",
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cached_tokens": None,
        "reasoning_tokens": None,
        "latency_ms": latency,
        "ttft_ms": None,
        "cost_usd": cost,
        "price_source": "profile" if cost else None,
        "ok": True,
        **extra,
        "_at": ms,
    }


# (type, step, ms, data): a run with an llm step, a map of two items, an agent of three turns (one failed),
# a subflow, a foreach of two iterations, a failed step with a hostile name, and a gate it waits at
SCRIPT: list[tuple[str, str | None, int, dict[str, Any]]] = [
    ("run_started", None, 0, {"flow": "f"}),
    ("step_started", "plan", 10, {"block": "plan", "kind": "llm"}),
    ("model_call", "plan", 60, call(60, 40, (10, 20), 0.0001)),
    ("step_finished", "plan", 70, {"block": "plan", "duration_ms": 60}),
    ("step_started", "summaries", 80, {"block": "sum", "kind": "map"}),
    ("step_started", "summaries", 85, {"block": "sum", "kind": "llm", "index": 0, "items": 2}),
    ("step_started", "summaries", 86, {"block": "sum", "kind": "llm", "index": 1, "items": 2}),
    ("model_call", "summaries", 120, call(120, 30, (5, 7), 0.002, index=0)),
    ("model_call", "summaries", 125, call(125, 35, (6, 8), None, index=1)),
    ("step_finished", "summaries", 130, {"duration_ms": 45, "index": 0}),
    ("step_finished", "summaries", 131, {"duration_ms": 45, "index": 1}),
    ("step_finished", "summaries", 135, {"duration_ms": 55}),
    ("step_started", "investigate", 140, {"block": "investigate", "kind": "agent"}),
    ("model_call", "investigate", 170, call(170, 25, (100, 10), 0.01, purpose="agent", turn=1)),
    (
        "model_call",
        "investigate",
        200,
        {
            **call(200, 20, (0, 0), None, purpose="agent", turn=2),
            "ok": False,
            "error": "rate limited",
        },
    ),
    ("model_call", "investigate", 250, call(250, 45, (120, 30), 0.02, purpose="agent", turn=3)),
    ("step_finished", "investigate", 260, {"duration_ms": 120}),
    ("step_started", "headline", 270, {"kind": "flow", "flow": "tldr"}),
    ("step_started", "headline.summarize", 275, {"block": "summarize", "kind": "llm"}),
    ("model_call", "headline.summarize", 300, call(300, 20, (3, 4), 1.5)),
    ("step_finished", "headline.summarize", 310, {"duration_ms": 35}),
    ("step_finished", "headline", 315, {"duration_ms": 45}),
    ("step_started", "bullets", 320, {"kind": "foreach"}),
    ("step_started", "bullet", 321, {"block": "bullet", "index": 0, "items": 2}),
    ("step_finished", "bullet", 322, {"duration_ms": 1, "index": 0}),
    ("step_started", "bullet", 323, {"block": "bullet", "index": 1, "items": 2}),
    ("step_finished", "bullet", 324, {"duration_ms": 1, "index": 1}),
    ("step_finished", "bullets", 330, {"duration_ms": 10}),
    ("step_started", HOSTILE, 335, {"block": HOSTILE, "kind": "transform"}),
    ("step_failed", HOSTILE, 340, {"block": HOSTILE, "error": HOSTILE, "duration_ms": 5}),
    ("approval_required", "ask", 345, {"interrupt_id": "i1", "value": {"message": "ok?"}}),
]
# the React Flow graph's groups (docs/reactflow.md): `bullet` is the body of the foreach `bullets`
GRAPH = {
    "nodes": [
        {"id": "bullets", "data": {"view": {"group": "bullets__cluster"}}},
        {"id": "bullet", "data": {"view": {"group": "bullets__cluster"}}},
    ],
    "groups": [{"id": "bullets__cluster", "step": "bullets", "parent": None}],
}


def events() -> list[dict[str, Any]]:
    found = []
    for seq, (kind, step, ms, data) in enumerate(SCRIPT, start=1):
        found.append(
            {
                "type": kind,
                "run_id": "r1",
                "seq": seq,
                "step": step,
                "time": at(ms),
                "data": {key: value for key, value in data.items() if key != "_at"},
            }
        )
    return found


DRAW = """async ([events, graph]) => {
  const { Timeline, drawTimeline } = await import("/static/timeline.js");
  const h = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    node.append(...children.filter((c) => c !== null && c !== undefined));
    return node;
  };
  const host = document.createElement("div");
  host.id = "under-test";
  host.className = "timeline";
  document.body.prepend(host);
  const timeline = new Timeline(graph);
  for (const event of events) timeline.add(event);
  drawTimeline(host, timeline, h);
  return [...host.querySelectorAll("li.tl-row")].map((row) => ({
    kind: row.dataset.kind, step: row.dataset.step, index: row.dataset.index ?? null, status: row.dataset.status,
    depth: Number(row.style.getPropertyValue("--depth")), label: row.querySelector(".tl-label").textContent,
    text: row.querySelector(".tl-bar").getAttribute("aria-label"),
    card: row.querySelector(".tl-card").textContent,
    left: row.querySelector(".tl-bar").style.left, tabindex: row.querySelector(".tl-bar").getAttribute("tabindex"),
  }));
}"""


def draw(
    page: Any, live: Live, given: list[dict[str, Any]], graph: dict[str, Any] | None = GRAPH
) -> list[Any]:
    page.goto(live.url + "/")
    page.locator("#flow-list [data-flow]").first.wait_for()
    rows: list[Any] = page.evaluate(DRAW, [given, graph])
    return rows


def test_the_timeline_has_a_row_per_step_item_and_model_call(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    live = serve(yard, watch=False, schedules=False)
    rows = draw(page, live, events())
    shown = [(row["kind"], row["step"], row["index"], row["depth"]) for row in rows]
    assert shown == [
        ("step", "plan", None, 0),
        ("model_call", "plan", None, 1),
        ("step", "summaries", None, 0),
        ("item", "summaries", "0", 1),
        ("model_call", "summaries", "0", 2),
        ("item", "summaries", "1", 1),
        ("model_call", "summaries", "1", 2),
        ("step", "investigate", None, 0),
        *[("model_call", "investigate", None, 1)] * 3,
        ("step", "headline", None, 0),
        ("step", "headline.summarize", None, 1),
        ("model_call", "headline.summarize", None, 2),
        ("step", "bullets", None, 0),
        ("item", "bullet", "0", 1),
        ("item", "bullet", "1", 1),
        ("step", HOSTILE, None, 0),
        ("step", "ask", None, 0),
    ]
    # one bar per step, item and model call, each focusable, its text the same on hover and for a screen reader
    assert all(row["tabindex"] == "0" and row["text"] == row["card"] for row in rows)
    statuses = {
        (row["kind"], row["step"], row["index"], row["label"]): row["status"] for row in rows
    }
    assert statuses[("step", HOSTILE, None, HOSTILE)] == "failed"
    assert statuses[("step", "ask", None, "ask")] == "waiting"
    assert [
        row["status"]
        for row in rows
        if row["step"] == "investigate" and row["kind"] == "model_call"
    ] == ["finished", "failed", "finished"]
    # a model call's bar ends at its event and starts latency_ms earlier: the plan call 20 ms .. 60 ms of 345 ms
    plan_call = rows[1]
    assert float(plan_call["left"].rstrip("%")) == pytest.approx(20 / 345 * 100, abs=0.01)
    # the hover text holds what the trace holds
    assert (
        plan_call["text"]
        == "model call mock/mock-1 · tokens 10 in, 20 out · cost $0.000100 · latency 40 ms"
    )
    # no price: unknown
    assert rows[6]["text"].endswith("tokens 6 in, 8 out · cost unknown · latency 35 ms")
    failed = rows[9]["text"]
    assert "agent" in failed and "turn 2" in failed and "failed: rate limited" in failed
    # a step's text sums its model calls (its items' too); an unknown price is never counted as $0
    summaries = rows[2]["text"]
    assert "2 model calls" in summaries and "tokens 11 in, 15 out" in summaries
    assert f"cost >= {money(0.002)} (1 unpriced)" in summaries
    investigate = rows[7]["text"]
    assert "3 model calls" in investigate and "tokens 220 in, 40 out" in investigate
    assert f"cost >= {money(0.03)} (1 unpriced)" in investigate
    assert "cost $1.50" in rows[11]["text"]  # headline: its subflow step's call
    # a hostile step name is text, never markup
    assert page.evaluate("window.pwned") is None
    assert page.locator("#under-test img").count() == 0
    summary = page.locator("#under-test .tl-summary").inner_text()
    assert "7 model calls" in summary and "(2 unpriced)" in summary


def test_a_bar_shows_its_card_on_keyboard_focus(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    live = serve(yard, watch=False, schedules=False)
    draw(page, live, events())
    card = page.locator("#under-test li.tl-model_call .tl-card").first
    assert card.is_hidden()
    page.locator("#under-test .tl-bar").first.focus()
    page.keyboard.press("Tab")  # from the plan step's bar to its model call's
    card.wait_for(state="visible")
    assert "tokens 10 in, 20 out" in card.inner_text()


def test_a_step_without_its_start_in_the_trace_and_a_run_that_stopped(
    yard: Path, serve: Callable[..., Live], page: Any
) -> None:
    live = serve(yard, watch=False, schedules=False)
    given = [
        {"type": "run_started", "run_id": "r", "seq": 1, "step": None, "time": at(0), "data": {}},
        # finished without a step_started in the trace: drawn from its duration
        {
            "type": "step_finished",
            "run_id": "r",
            "seq": 2,
            "step": "early",
            "time": at(100),
            "data": {"duration_ms": 50},
        },
        {
            "type": "step_started",
            "run_id": "r",
            "seq": 3,
            "step": "late",
            "time": at(120),
            "data": {},
        },
        {
            "type": "run_failed",
            "run_id": "r",
            "seq": 4,
            "step": None,
            "time": at(200),
            "data": {"status": "interrupted", "error": "stopped"},
        },
    ]
    rows = draw(page, live, given, None)
    assert [(row["step"], row["status"]) for row in rows] == [
        ("early", "finished"),
        ("late", "interrupted"),
    ]
    assert float(rows[0]["left"].rstrip("%")) == pytest.approx(25.0, abs=0.01)


def spend_of(trace: list[dict[str, Any]]) -> Spend:
    spent = Spend()
    for event in trace:
        if event["type"] == "model_call":
            spent.add(event["data"])
    return spent


# A yard whose flow maps an llm block over two texts, then runs an agent for two turns (a tool call, then its
# answer), on the mock model at a stated price; and a flow on a loopback OpenAI server, whose price nobody
# knows (engine/models/pricing.py: a model behind a `base_url` has no list price).
def spend_yard(base_url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    return {**SPEND_YARD, "blockyard.yaml": CONFIG.replace("STUB_URL", base_url)}


CONFIG = """
        models:
          default:
            provider: mock
            pricing: {input_per_mtok: 3.0, output_per_mtok: 15.0}
          agent_demo:
            provider: mock
            pricing: {input_per_mtok: 1.0, output_per_mtok: 2.0}
            replies:
              spend.look:
                - $tool_calls: [{name: current_time, args: {timezone: UTC}}]
                - {answer: "It is late."}
          unpriced: {provider: openai, name: m, base_url: 'STUB_URL', api_key_env: STUB_KEY}
        """
SPEND_YARD = {
    "blocks/summarize.yaml": """
        block: summarize
        version: 1
        description: Summarize a text.
        kind: llm
        inputs:
          text: {type: string}
        outputs:
          summary: {type: string}
        prompt:
          user: "Summarize: {{ text }}"
        """,
    "blocks/look.yaml": """
        block: look
        version: 1
        description: Look at the clock and answer.
        kind: agent
        model: agent_demo
        inputs: {}
        outputs:
          answer: {type: string}
        prompt:
          user: What time is it?
        tools: [current_time]
        max_iterations: 3
        """,
    "blocks/guess.yaml": """
        block: guess
        version: 1
        description: Guess on a model whose price is not known.
        kind: llm
        model: unpriced
        inputs:
          text: {type: string}
        outputs:
          guess: {type: string}
        prompt:
          user: "Guess: {{ text }}"
        """,
    "flows/spend.yaml": """
        flow: spend
        version: 1
        description: Summarize two texts, then ask an agent.
        inputs:
          texts: {type: array, items: {type: string}, default: ["one two three", "four five six"]}
        outputs: [summaries, answer]
        steps:
          - id: summaries
            map:
              items: inputs.texts
              as: text
              uses: summarize
              with: {text: "{{ text }}"}
              collect: summaries
          - id: look
            uses: look
        """,
    "flows/free.yaml": """
        flow: free
        version: 1
        description: One call of a model without a price.
        inputs: {}
        outputs: [guess]
        steps:
          - id: guess
            uses: guess
            with: {text: "a number"}
        """,
    "flows/mixed.yaml": """
        flow: mixed
        version: 1
        description: A call at a known price and one at an unknown price.
        inputs: {}
        outputs: [summary, guess]
        steps:
          - id: sum
            uses: summarize
            with: {text: "one two"}
          - id: guess
            uses: guess
            with: {text: "a number"}
        """,
}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def stored_trace(live: Live, run_id: str) -> list[dict[str, Any]]:
    with live.client() as http:
        found: list[dict[str, Any]] = http.get(
            f"/runs/{run_id}/events", headers={"Accept": "application/json"}
        ).json()["events"]
    return found


def test_a_run_of_the_mock_model_draws_its_steps_and_model_calls(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], page: Any
) -> None:
    live = serve(make_yard(spend_yard()), watch=False, schedules=False)
    page.goto(live.url + "/#flow/spend")
    page.locator("#flow-title").filter(has_text="spend v1").wait_for()
    page.click("#run-button")
    page.locator("#run-status [data-status=finished]").wait_for()
    run_id = page.url.rsplit("#run/", 1)[1]
    trace = stored_trace(live, run_id)
    calls = [event for event in trace if event["type"] == "model_call"]
    assert len(calls) == 4  # two map items, two agent turns
    steps = {
        (event["step"], event["data"].get("index"))
        for event in trace
        if event["type"] == "step_started"
    }
    rows = page.locator("#run-timeline li.tl-row")
    page.wait_for_function(
        "n => document.querySelectorAll('#run-timeline li.tl-row').length === n",
        arg=len(steps) + len(calls),
    )
    assert page.locator("#run-timeline li.tl-model_call").count() == len(calls)
    drawn = {
        (row.get_attribute("data-step"), row.get_attribute("data-index"))
        for row in rows.all()
        if row.get_attribute("data-kind") != "model_call"
    }
    assert drawn == {(step, None if index is None else str(index)) for step, index in steps}
    assert {row.get_attribute("data-status") for row in rows.all()} == {"finished"}
    # each model call's hover text: the tokens, cost and latency of its event
    texts = sorted(
        page.locator("#run-timeline li.tl-model_call .tl-bar").evaluate_all(
            "bars => bars.map(bar => bar.getAttribute('aria-label'))"
        )
    )
    for event in calls:
        data = event["data"]
        expected = (
            f"tokens {data['input_tokens']} in, {data['output_tokens']} out "
            f"({data['cached_tokens']} cached, {data['reasoning_tokens']} reasoning) · "
            f"cost {money(data['cost_usd'])}"
        )
        assert any(expected in text for text in texts), (expected, texts)
    agent = [row for row in page.locator("#run-timeline li.tl-model_call[data-step=look]").all()]
    assert [row.inner_text() for row in agent] == [
        f"{calls[2]['data']['model']} turn 1",
        f"{calls[3]['data']['model']} turn 2",
    ]
    look = (
        page.locator("#run-timeline li.tl-step[data-step=look] .tl-bar").get_attribute("aria-label")
        or ""
    )
    look_spend = spend_of([event for event in calls if event["step"] == "look"])
    assert (
        f"2 model calls · tokens {look_spend.input_tokens} in, {look_spend.output_tokens} out"
        in look
    )
    assert f"cost {look_spend.cost_text()}" in look
    # model_call is one of the engine's events in the list, not a step's custom event
    listed = page.locator("#run-events li[data-type=model_call]")
    assert listed.count() == len(calls) and page.locator("#run-events li.custom").count() == 0
    # the runs list shows the run's cost
    whole = spend_of(trace)
    assert whole.cost_known and whole.cost_usd > 0
    cost = page.locator(f"#run-table tbody tr[data-run='{run_id}'] td.cost")
    cost.filter(has_text=whole.cost_text()).wait_for()
    assert "4 model calls" in (cost.get_attribute("title") or "")


def test_the_runs_list_shows_an_unknown_price_as_unknown(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    page: Any,
    stub: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    stub.queue(
        Reply.structured_output({"guess": "seven"}), Reply.structured_output({"guess": "eight"})
    )
    live = serve(make_yard(spend_yard(stub.base_url)), watch=False, schedules=False)
    with live.client() as http:
        run = http.post("/flows/free/runs", json={"inputs": {}}).json()
        mixed = http.post("/flows/mixed/runs", json={"inputs": {}}).json()
    assert run["status"] == mixed["status"] == "finished", (run, mixed)
    page.goto(live.url + f"/#run/{run['run_id']}")
    cost = page.locator(f"#run-table tbody tr[data-run='{run['run_id']}'] td.cost")
    cost.filter(has_text="unknown").wait_for()
    bar = page.locator("#run-timeline li.tl-model_call .tl-bar")
    bar.wait_for()
    assert "cost unknown" in (bar.get_attribute("aria-label") or "")
    assert "$0" not in (cost.inner_text() + (bar.get_attribute("aria-label") or ""))
    # a run with a known and an unknown price: at least what is known, and how many calls it lacks
    known = spend_of(stored_trace(live, mixed["run_id"]))
    assert known.model_calls == 2 and known.unpriced_calls == 1 and known.cost_usd > 0
    partly = page.locator(f"#run-table tbody tr[data-run='{mixed['run_id']}'] td.cost")
    assert partly.inner_text() == f">= {money(known.cost_usd)}"
    assert f"cost >= {money(known.cost_usd)} (1 unpriced)" in (partly.get_attribute("title") or "")


def test_the_timeline_grows_while_the_run_goes_on(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], page: Any
) -> None:
    yard = make_yard(
        {
            **spend_yard(),
            "blocks/nap.yaml": """
        block: nap
        version: 1
        description: Wait a while.
        kind: wait
        duration: 1500ms
        """,
            "flows/napping.yaml": """
        flow: napping
        version: 1
        description: Guess, nap, guess again.
        inputs: {}
        outputs: [summary]
        steps:
          - id: first
            uses: summarize
            with: {text: "one"}
          - id: nap
            uses: nap
          - id: second
            uses: summarize
            with: {text: "two"}
        """,
        }
    )
    live = serve(yard, watch=False, schedules=False)
    page.goto(live.url + "/#flow/napping")
    page.locator("#flow-title").filter(has_text="napping v1").wait_for()
    page.click("#run-button")
    napping = page.locator("#run-timeline li.tl-step[data-step=nap][data-status=running]")
    napping.wait_for()  # drawn while it runs ...
    assert page.locator("#run-timeline li.tl-step[data-step=second]").count() == 0
    page.locator(
        "#run-timeline li.tl-step[data-step=second][data-status=finished]"
    ).wait_for()  # ... then done
    page.locator("#run-timeline li.tl-step[data-step=nap][data-status=finished]").wait_for()
    assert page.locator("#run-timeline li.tl-model_call").count() == 2


def test_a_gate_waits_on_the_timeline_until_it_is_decided(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], page: Any
) -> None:
    live = serve(make_yard({**YARD, "flows/gated.yaml": GATED_FLOW}), watch=False, schedules=False)
    with live.client() as client:
        run = start_gated_run(client)
    page.goto(live.url + f"/#run/{run['run_id']}")
    gate = page.locator("#run-timeline li.tl-step[data-step=ask]")
    page.locator("#run-timeline li.tl-step[data-step=ask][data-status=waiting]").wait_for()
    assert "step ask · waiting" in (gate.locator(".tl-bar").get_attribute("aria-label") or "")
    form = page.locator("#run-approvals form.gate")
    form.locator("[data-field=b]").fill("2")
    form.locator("[data-action=approve]").click()
    page.locator("#run-status [data-status=finished]").wait_for()
    # the decision goes on with the row its wait began: one bar from the question to the answer
    page.locator("#run-timeline li.tl-step[data-step=sum][data-status=finished]").wait_for()
    # the view may be drawn again from the run's events once the decision is taken (a busy machine sees
    # it half-drawn): what it settles on has one bar for the gate, finished
    page.locator("#run-timeline li.tl-step[data-step=ask][data-status=finished]").wait_for()
    assert gate.count() == 1 and gate.get_attribute("data-status") == "finished"
