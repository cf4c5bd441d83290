"""A React page on LangGraph's own `useStream` hook, in a real browser, against `blockyard serve`.

usestream_page/app.jsx is a chat page written the way LangGraph's docs write one: `useStream` from
`@langchain/langgraph-sdk/react` (2.0.0, from npm with its whole tree locked:
tests/support/npm-locks/usestream-page/) with `fetchStateHistory: true`, its messages (with the edit,
regenerate and branch controls of LangGraph's branching pattern), a chat box, a JSON input, the hook's
`isLoading` / `error` / `values`, and an interrupt's LangChain human-in-the-loop request with approve / edit /
reject buttons (a gate's, or an agent's tool call's). esbuild bundles it once per module; headless
chromium (Playwright, tests/serve/browser.py) loads it from the server's own origin (`page.route` answers
`/__page/...`), and the hook talks to the server's LangGraph API (`/lg`) as it would to LangGraph's.

Each test does what a person does on the page and asserts both what the page shows and what the server
recorded, read over HTTP: a chat of two turns on `support_chat` (streamed, then agreeing with the thread's
state and history); an approval gate decided from the page — approved with its default, edited, a gate
that needs a value offering no approve, and rejected with a message; and LangGraph's branching pattern — the
first message edited and an answer regenerated (each a run from the checkpoint before that message), the
model (a loopback OpenAI-compatible server) sent exactly the branch's messages, and the branch switcher
going back to the first branch; an agent's tool call (the example note keeper's write_file, `approve_tools`)
approved, edited and rejected from the page, the agent answering from what it was sent back; and the same
through a proxy that sends every JSON body as `text/plain`, as agent-chat-ui's API passthrough does.
Without node, npm or chromium the tests skip, and fail
under `CI=true`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from engine.serve.server import Settings
from tests.conftest import skip_or_fail
from tests.serve.langgraph_api.conftest import EXTRA, example_yard
from tests.serve.serve_helpers import Live, start_live
from tests.support.chromium import INSTALL
from tests.support.chromium import find as find_chromium
from tests.support.npm import npm_lock
from tests.support.usage_llm import UsageLLM

PAGE = Path(__file__).with_name("usestream_page")
# in npm-locks/usestream-page/, with the react, react-dom, @langchain/core and esbuild it takes
SDK_VERSION = "2.0.0"
REPLY = "Thanks for writing to ACME support. How can I help you today?"
WAIT_MS = 20_000

# the example yard's `gated` asks for `b` without a default; this gate has one, so it can be approved as asked
GATED_DEFAULT = """
flow: gated_default
version: 1
description: Ask before adding, suggesting an amount.
inputs:
  a: {type: integer, default: 1}
outputs: [total]
steps:
  - id: ask
    approval:
      message: "Add how much?"
      fields: {b: {type: integer, default: 2, description: The amount to add.}}
  - id: sum
    uses: adder
    with: {x: "{{ inputs.a }}", y: "{{ context.b }}"}
"""

# every text the page's AI messages show, as they change: a streamed reply shows its beginning first
WATCH_REPLIES = """
window.__replies = [];
new MutationObserver(() => {
  for (const node of document.querySelectorAll(
    '[data-testid=message][data-type=ai] [data-testid=message-text]'
  )) {
    if (!window.__replies.includes(node.textContent)) window.__replies.push(node.textContent);
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


# a conversation on a loopback OpenAI-compatible server (tests/support/usage_llm.py), through langchain-openai:
# what the model is sent of a branch is read back from the server
LOOP_CHAT = """
flow: loop_chat
version: 1
description: A conversation on the loopback model.
inputs:
  message: {{type: string}}
outputs: [reply]
steps:
  - id: answer
    uses: loop_reply
    with: {{message: "{{{{ inputs.message }}}}"}}
"""
LOOP_REPLY = """
block: loop_reply
version: 1
description: Answer on the loopback model.
kind: llm
model: {{provider: openai, base_url: "{url}", name: usage-model}}
inputs:
  message: {{type: string}}
outputs:
  reply: {{type: string}}
prompt:
  system: Be brief.
  user: "{{{{ message }}}}"
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, llm: UsageLLM) -> Iterator[Live]:
    """The LangGraph API tests' server (conftest.py), with a gate that has a default too and a
    conversation on the loopback model."""
    root = example_yard(
        tmp_path_factory.mktemp("yard"),
        {
            **EXTRA,
            "flows/gated_default.yaml": GATED_DEFAULT,
            "flows/loop_chat.yaml": LOOP_CHAT.format(),
            "blocks/loop_reply.yaml": LOOP_REPLY.format(url=llm.base_url),
        },
    )
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the page: index.html and app.js, app.jsx bundled by the locked esbuild."""
    node = shutil.which("node")
    if node is None:
        skip_or_fail("the useStream page is bundled in node (`apt-get install -y nodejs npm`)")
        raise AssertionError("unreachable")
    if not find_chromium():
        skip_or_fail(f"the useStream page runs in a headless Chromium: {INSTALL}")
    modules = npm_lock("usestream-page", "esbuild") / "node_modules"
    out = tmp_path_factory.mktemp("usestream-page")
    done = subprocess.run(
        [
            node,
            str(modules / "esbuild" / "bin" / "esbuild"),
            str(PAGE / "app.jsx"),
            "--bundle",
            "--format=esm",
            "--jsx=automatic",
            '--define:process.env.NODE_ENV="production"',
            f"--outfile={out / 'app.js'}",
            "--log-level=warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},  # the page's imports: the locked install
    )
    assert done.returncode == 0, done.stderr
    sdk = json.loads((modules / "@langchain" / "langgraph-sdk" / "package.json").read_text())
    assert sdk["version"] == SDK_VERSION
    shutil.copy(PAGE / "index.html", out / "index.html")
    return out


@pytest.fixture
def ui(bundle: Path, live: Live, page: Any) -> Any:
    """The browser tab, where the server's `/__page/<file>` is answered from the bundle's folder (the
    page is then of the server's origin: its calls to the API need no CORS)."""
    page.route(
        f"{live.url}/__page/*",
        lambda route: route.fulfill(path=bundle / route.request.url.split("?")[0].rsplit("/")[-1]),
    )
    return page


def open_page(page: Any, live: Live, assistant: str, thread: str = "") -> None:
    """Load the page on `assistant` (and an existing thread, if given)."""
    query = {"api": f"{live.url}/lg", "assistant": assistant}
    if thread:
        query["thread"] = thread
    page.goto(f"{live.url}/__page/index.html?{urlencode(query)}")
    expect(page.get_by_test_id("loading")).to_have_text("false")


def settled(page: Any, messages: int) -> None:
    """Wait until the page shows `messages` messages and no run is streaming."""
    expect(page.get_by_test_id("message")).to_have_count(messages, timeout=WAIT_MS)
    expect(page.get_by_test_id("loading")).to_have_text("false", timeout=WAIT_MS)


def shown_messages(page: Any) -> list[tuple[str, str]]:
    return [
        (message.get_attribute("data-type"), message.get_by_test_id("message-text").inner_text())
        for message in page.get_by_test_id("message").all()
    ]


def shown_values(page: Any) -> dict[str, Any]:
    values: dict[str, Any] = json.loads(page.get_by_test_id("values").inner_text())
    return values


def thread_of(page: Any) -> str:
    expect(page.get_by_test_id("thread-id")).not_to_have_text("")
    thread: str = page.get_by_test_id("thread-id").inner_text()
    return thread


def run_ids(page: Any) -> list[str]:
    """The runs the page started, in order (a resumed run keeps its id: listed once)."""
    return list(dict.fromkeys(page.get_by_test_id("run-ids").inner_text().split(",")))


def start_gated(page: Any, live: Live, flow: str) -> str:
    """Open the page on `flow`, run it with a = 1 and wait for its gate; the thread's id."""
    open_page(page, live, flow)
    page.get_by_test_id("json-input").fill('{"a": 1}')
    page.get_by_test_id("json-send").click()
    expect(page.get_by_test_id("action-request")).to_have_count(1, timeout=WAIT_MS)
    expect(page.get_by_test_id("loading")).to_have_text("false")
    return thread_of(page)


def test_a_chat_of_two_turns_streams_and_agrees_with_the_threads_state(ui: Any, live: Live) -> None:
    ui.add_init_script(WATCH_REPLIES)
    open_page(ui, live, "support_chat")
    ui.get_by_test_id("chat-text").fill("My name is Ada")
    ui.get_by_test_id("chat-send").click()
    settled(ui, 2)
    ui.get_by_test_id("chat-text").fill("What is my name?")
    ui.get_by_test_id("chat-send").click()
    settled(ui, 4)
    turns = [
        ("human", "My name is Ada"),
        ("ai", REPLY),
        ("human", "What is my name?"),
        ("ai", "Your name is Ada."),
    ]
    assert shown_messages(ui) == turns
    # the reply was streamed: the page showed its beginning before all of it
    replies: list[str] = ui.evaluate("window.__replies")
    assert any(REPLY.startswith(text) and len(text) < len(REPLY) for text in replies), replies
    assert REPLY in replies
    assert ui.get_by_test_id("error").inner_text() == ""
    expect(ui.get_by_test_id("interrupt")).to_have_attribute("data-present", "false")
    assert shown_values(ui)["reply"] == "Your name is Ada."
    # the messages' controls of LangGraph's branching pattern are there (branching itself is not tested)
    expect(ui.get_by_test_id("edit-send")).to_have_count(2)
    expect(ui.get_by_test_id("regenerate")).to_have_count(2)

    thread = thread_of(ui)
    first, second = run_ids(ui)
    with live.client() as client:
        state = client.get(f"/lg/threads/{thread}/state").json()
        assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == turns
        assert state["next"] == [] and state["checkpoint"]["checkpoint_id"] == second
        history = client.post(f"/lg/threads/{thread}/history", json={"limit": 10}).json()
        # newest first, each turn as its input and its end (docs/langgraph-api.md), one chain of parents:
        # what the hook's branching reads (`parent_checkpoint`)
        chain = [second, f"{second}:in", first, f"{first}:in", "__start__"]
        assert [h["checkpoint"]["checkpoint_id"] for h in history] == chain
        assert [(h["parent_checkpoint"] or {}).get("checkpoint_id") for h in history] == [
            *chain[1:],
            None,
        ]
        assert [len(h["values"]["messages"]) for h in history] == [4, 3, 2, 1, 0]
        got = client.get(f"/lg/threads/{thread}").json()
        assert got["status"] == "idle" and got["metadata"]["graph_id"] == "support_chat"
        runs = client.get(f"/lg/threads/{thread}/runs").json()
        assert sorted((r["run_id"], r["status"]) for r in runs) == sorted(
            [(first, "success"), (second, "success")]
        )
    # the hook's history is the thread's, as the server answers it
    expect(ui.get_by_test_id("history-count")).to_have_text(str(len(history)))


def test_a_gate_approved_from_the_page_finishes_with_its_default(ui: Any, live: Live) -> None:
    thread = start_gated(ui, live, "gated_default")
    request = ui.get_by_test_id("action-request")
    expect(request.get_by_test_id("action-name")).to_have_text("ask")
    expect(request.get_by_test_id("action-description")).to_have_text("Add how much?")
    assert json.loads(request.get_by_test_id("action-args").inner_text()) == {"b": 2}
    expect(request.get_by_test_id("allowed-decisions")).to_have_text("approve,edit,reject")
    assert json.loads(request.get_by_test_id("edit-args").input_value()) == {"b": 2}
    with live.client() as client:
        assert client.get(f"/lg/threads/{thread}").json()["status"] == "interrupted"
        (interrupt,) = client.get(f"/lg/threads/{thread}/state").json()["tasks"][0]["interrupts"]
    expect(ui.get_by_test_id("interrupt-item")).to_have_attribute("data-id", interrupt["id"])

    request.get_by_test_id("approve").click()
    expect(ui.get_by_test_id("interrupt")).to_have_attribute(
        "data-present", "false", timeout=WAIT_MS
    )
    expect(ui.get_by_test_id("loading")).to_have_text("false")
    assert shown_values(ui)["total"] == 3
    assert ui.get_by_test_id("error").inner_text() == ""
    (run,) = run_ids(ui)
    with live.client() as client:
        assert client.get(f"/lg/threads/{thread}/runs/{run}").json()["status"] == "success"
        assert client.get(f"/lg/threads/{thread}/state").json()["values"]["total"] == 3
        assert client.get(f"/lg/threads/{thread}").json()["status"] == "idle"
        trace = client.get(f"/runs/{run}/events", headers={"Accept": "application/json"}).json()
    (decided,) = [e["data"] for e in trace["events"] if e["type"] == "approval_decided"]
    assert decided["decision"] == "approve" and decided["values"] == {"b": 2}


def test_a_gate_that_needs_a_value_offers_no_approve_and_a_refused_edit_leaves_it_waiting(
    ui: Any, live: Live
) -> None:
    thread = start_gated(ui, live, "gated")
    request = ui.get_by_test_id("action-request")
    assert json.loads(request.get_by_test_id("action-args").inner_text()) == {"b": None}
    # `b` has no default: the request offers no approve (the page draws none), only an edit
    expect(request.get_by_test_id("allowed-decisions")).to_have_text("edit,reject")
    expect(request.get_by_test_id("approve")).to_have_count(0)
    # an edit with a value that does not fit `b` is refused, and the gate keeps waiting
    request.get_by_test_id("edit-args").fill('{"b": "many"}')
    request.get_by_test_id("edit-decision").click()
    expect(ui.get_by_test_id("error")).to_contain_text("gate 'ask': field", timeout=WAIT_MS)
    expect(ui.get_by_test_id("loading")).to_have_text("false")
    (run,) = run_ids(ui)
    with live.client() as client:
        assert client.get(f"/lg/threads/{thread}").json()["status"] == "interrupted"
        assert client.get(f"/lg/threads/{thread}/runs/{run}").json()["status"] == "interrupted"
        assert client.get(f"/runs/{run}").json()["status"] == "waiting"
    expect(ui.get_by_test_id("action-request")).to_have_count(1)  # still asked

    request.get_by_test_id("edit-args").fill('{"b": 5}')
    request.get_by_test_id("edit-decision").click()
    expect(ui.get_by_test_id("interrupt")).to_have_attribute(
        "data-present", "false", timeout=WAIT_MS
    )
    expect(ui.get_by_test_id("loading")).to_have_text("false")
    assert shown_values(ui)["total"] == 6
    assert ui.get_by_test_id("error").inner_text() == ""
    assert run_ids(ui) == [run]  # the decision resumed the run
    with live.client() as client:
        assert client.get(f"/lg/threads/{thread}/runs/{run}").json()["status"] == "success"
        state = client.get(f"/lg/threads/{thread}/state").json()
        assert state["values"]["total"] == 6 and state["next"] == [] and state["tasks"] == []
        got = client.get(f"/runs/{run}").json()
        assert (got["status"], got["outputs"]) == ("finished", {"total": 6})


def test_a_gate_rejected_from_the_page_fails_the_run_with_the_message_recorded(
    ui: Any, live: Live
) -> None:
    thread = start_gated(ui, live, "gated")
    request = ui.get_by_test_id("action-request")
    request.get_by_test_id("reject-message").fill("not today")
    request.get_by_test_id("reject").click()
    # on_reject defaults to `end`: the run ends after the gate, without the `total` the flow promises
    missing = "flow 'gated' finished without output 'total'"
    expect(ui.get_by_test_id("error")).to_contain_text(missing, timeout=WAIT_MS)
    expect(ui.get_by_test_id("loading")).to_have_text("false")
    (run,) = run_ids(ui)
    with live.client() as client:
        assert client.get(f"/lg/threads/{thread}/runs/{run}").json()["status"] == "error"
        assert client.get(f"/lg/threads/{thread}").json()["status"] == "error"
        got = client.get(f"/runs/{run}").json()
        assert got["status"] == "failed" and missing in got["error"]
        trace = client.get(f"/runs/{run}/events", headers={"Accept": "application/json"}).json()
        state = client.get(f"/lg/threads/{thread}/state").json()
    (decided,) = [e["data"] for e in trace["events"] if e["type"] == "approval_decided"]
    assert decided["decision"] == "reject" and decided["reason"] == "not today"
    assert "total" not in state["values"]

    # the page opened again on the thread reads the failure from the thread's history
    open_page(ui, live, "gated", thread)
    expect(ui.get_by_test_id("error")).to_contain_text(missing, timeout=WAIT_MS)
    expect(ui.get_by_test_id("interrupt")).to_have_attribute("data-present", "false")
    assert thread_of(ui) == thread


def say(page: Any, text: str, messages: int) -> None:
    page.get_by_test_id("chat-text").fill(text)
    page.get_by_test_id("chat-send").click()
    settled(page, messages)


def sent(llm: UsageLLM) -> list[tuple[str, str]]:
    """What the model's last call was sent, less its system prompt."""
    return [item for item in llm.calls[-1].messages if item[0] != "system"]


def test_the_page_edits_the_first_message_regenerates_an_answer_and_switches_branches(
    ui: Any, live: Live, llm: UsageLLM
) -> None:
    open_page(ui, live, "loop_chat")
    say(ui, "My name is Ada", 2)
    say(ui, "I like tea", 4)
    thread = thread_of(ui)
    first_branch = shown_messages(ui)
    assert sent(llm) == [
        ("user", "My name is Ada"),
        ("assistant", first_branch[1][1]),
        ("user", "I like tea"),
    ]

    # edit the first message: a run from the checkpoint before it, the thread's start
    ui.get_by_test_id("message").nth(0).get_by_test_id("edit-text").fill("My name is Bob")
    ui.get_by_test_id("message").nth(0).get_by_test_id("edit-send").click()
    expect(ui.get_by_test_id("message").nth(0).get_by_test_id("message-text")).to_have_text(
        "My name is Bob", timeout=WAIT_MS
    )
    settled(ui, 2)
    assert sent(llm) == [("user", "My name is Bob")]  # nothing of the first branch
    expect(ui.get_by_test_id("message").nth(0).get_by_test_id("branch-index")).to_have_text("2 / 2")

    # regenerate the answer: its message said again from where it was said
    answered = ui.get_by_test_id("message").nth(1).get_attribute("data-id")
    calls = len(llm.calls)
    ui.get_by_test_id("message").nth(1).get_by_test_id("regenerate").click()
    expect(ui.get_by_test_id("message").nth(1)).not_to_have_attribute(
        "data-id", answered or "", timeout=WAIT_MS
    )
    settled(ui, 2)
    assert len(llm.calls) == calls + 1 and sent(llm) == [("user", "My name is Bob")]
    expect(ui.get_by_test_id("message").nth(1).get_by_test_id("branch-index")).to_have_text("2 / 2")

    # the thread's history holds every branch: two first turns under the start, two answers to Bob
    with live.client() as client:
        history = client.post(f"/lg/threads/{thread}/history", json={"limit": 100}).json()
    parents = [(h["parent_checkpoint"] or {}).get("checkpoint_id") for h in history]
    assert parents.count("__start__") == 2
    bob = next(
        h["checkpoint"]["checkpoint_id"]
        for h in history
        if h["metadata"]["source"] == "input"
        and h["values"]["messages"][-1]["content"] == "My name is Bob"
    )
    assert (
        sum(1 for h in history if (h["parent_checkpoint"] or {}).get("checkpoint_id") == bob) == 2
    )
    # three turns with an input and an end each, the regenerated answer's end, and the start
    assert len(history) == 3 * 2 + 1 + 1

    # back to the first branch with the first message's switcher: the page shows it whole again
    ui.get_by_test_id("message").nth(0).get_by_test_id("branch-prev").click()
    settled(ui, 4)
    assert shown_messages(ui) == first_branch


def test_through_a_proxy_that_sends_json_as_text_plain_the_page_chats_edits_and_decides(
    ui: Any, live: Live, llm: UsageLLM
) -> None:
    """agent-chat-ui's API passthrough forwards JSON bodies as `text/plain;charset=UTF-8`
    (docs/langgraph-api.md): every request of the page's hook goes so here, and all of it still works."""
    relabelled: list[str] = []

    def as_text(route: Any) -> None:
        request = route.request
        if request.post_data is None:
            route.continue_()
            return
        relabelled.append(f"{request.method} {request.url.split('/lg', 1)[1]}")
        route.continue_(headers={**request.headers, "content-type": "text/plain;charset=UTF-8"})

    ui.route(f"{live.url}/lg/**", as_text)
    open_page(ui, live, "loop_chat")
    say(ui, "My name is Ada", 2)
    ui.get_by_test_id("message").nth(0).get_by_test_id("edit-text").fill("My name is Bob")
    ui.get_by_test_id("message").nth(0).get_by_test_id("edit-send").click()
    expect(ui.get_by_test_id("message").nth(0).get_by_test_id("message-text")).to_have_text(
        "My name is Bob", timeout=WAIT_MS
    )
    settled(ui, 2)
    assert sent(llm) == [("user", "My name is Bob")]

    start_gated(ui, live, "gated_default")
    request = ui.get_by_test_id("action-request")
    request.get_by_test_id("edit-args").fill('{"b": 5}')
    request.get_by_test_id("edit-decision").click()
    expect(ui.get_by_test_id("interrupt")).to_have_attribute(
        "data-present", "false", timeout=WAIT_MS
    )
    expect(ui.get_by_test_id("loading")).to_have_text("false")
    assert shown_values(ui)["total"] == 6

    # an agent's tool call, rejected
    request, _thread = ask_to_save(ui, live)
    request.get_by_test_id("reject-message").fill("no")
    request.get_by_test_id("reject").click()
    settled(ui, 2)
    assert shown_messages(ui)[1] == ("ai", NOT_SAVED)
    # the runs (each a POST with a body: a new turn, an edit, a decision) all went as text/plain
    assert sum(1 for call in relabelled if call.startswith("POST /threads/")) >= 6


# the example yard's note keeper (flows/note_keeper.yaml): its agent's first turn calls write_file, which
# waits for a person (approve_tools); its scripted model then answers from what it is sent back
NOTE = {"path": "notes/note.md", "content": "Buy milk."}
SAVED = "Saved. You can read it with blockyard runs show."
NOT_SAVED = "All right, I did not save it. Tell me where you want it instead."


def ask_to_save(page: Any, live: Live) -> tuple[Any, str]:
    """Open the page on the note keeper, ask it to save a note, and wait for its tool call's request."""
    open_page(page, live, "note_keeper")
    page.get_by_test_id("chat-text").fill("Remember to buy milk")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("action-request")).to_have_count(1, timeout=WAIT_MS)
    expect(page.get_by_test_id("loading")).to_have_text("false")
    request = page.get_by_test_id("action-request")
    # the call as LangChain's human-in-the-loop request shows it: the tool, its arguments, the decisions
    expect(request.get_by_test_id("action-name")).to_have_text("write_file")
    assert json.loads(request.get_by_test_id("action-args").inner_text()) == NOTE
    expect(request.get_by_test_id("allowed-decisions")).to_have_text("approve,edit,reject")
    expect(request.get_by_test_id("action-description")).to_contain_text(
        "agent 'note_keeper' asks to call write_file("
    )
    return request, thread_of(page)


def decided_call(live: Live, thread: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """The thread's one run once it finished: its id, its tool calls (their events' data), its decision."""
    with live.client() as client:
        (run,) = client.get(f"/lg/threads/{thread}/runs").json()
        assert run["status"] == "success"
        trace = client.get(
            f"/runs/{run['run_id']}/events", headers={"Accept": "application/json"}
        ).json()
    events = trace["events"]
    calls = [
        e["data"] for e in events if e["type"] == "tool_call" and e["data"].get("kind") != "answer"
    ]
    (decision,) = [e["data"] for e in events if e["type"] == "approval_decided"]
    return run["run_id"], calls, decision


def test_an_agents_tool_call_approved_from_the_page_runs_and_the_agent_answers(
    ui: Any, live: Live
) -> None:
    request, thread = ask_to_save(ui, live)
    request.get_by_test_id("approve").click()
    settled(ui, 2)
    assert shown_messages(ui) == [("human", "Remember to buy milk"), ("ai", SAVED)]
    expect(ui.get_by_test_id("interrupt")).to_have_attribute("data-present", "false")
    assert ui.get_by_test_id("error").inner_text() == ""
    _run, calls, decision = decided_call(live, thread)
    assert [(c["status"], c.get("args")) for c in calls] == [("started", NOTE), ("ok", None)]
    assert decision["decision"] == "approve" and decision["values"] == NOTE


def test_an_agents_tool_call_edited_from_the_page_runs_with_the_changed_arguments(
    ui: Any, live: Live
) -> None:
    request, thread = ask_to_save(ui, live)
    request.get_by_test_id("edit-args").fill(json.dumps({**NOTE, "path": "shopping.md"}))
    request.get_by_test_id("edit-decision").click()
    settled(ui, 2)
    assert shown_messages(ui)[1] == ("ai", SAVED)
    run, calls, decision = decided_call(live, thread)
    assert calls[0]["args"] == {**NOTE, "path": "shopping.md"} and calls[1]["status"] == "ok"
    assert decision["values"]["path"] == "shopping.md"
    with live.client() as client:
        trace = client.get(f"/runs/{run}/events", headers={"Accept": "application/json"}).json()
    written = [e["data"]["path"] for e in trace["events"] if e["type"] == "file_written"]
    assert written == ["shopping.md"]


def test_an_agents_tool_call_rejected_from_the_page_runs_nothing_and_the_agent_reads_why(
    ui: Any, live: Live
) -> None:
    request, thread = ask_to_save(ui, live)
    request.get_by_test_id("reject-message").fill("not in my notes")
    request.get_by_test_id("reject").click()
    settled(ui, 2)
    # the scripted model answers so only when what it is sent holds the rejection (blockyard.yaml)
    assert shown_messages(ui)[1] == ("ai", NOT_SAVED)
    _run, calls, decision = decided_call(live, thread)
    (rejected,) = calls
    assert rejected["status"] == "rejected" and rejected["args"] == NOTE
    assert rejected["error"].endswith("so it did not run: not in my notes")
    assert decision["decision"] == "reject" and decision["reason"] == "not in my notes"
