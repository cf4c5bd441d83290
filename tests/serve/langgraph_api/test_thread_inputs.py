"""A thread's declared inputs written over the LangGraph API (`POST /threads/{id}/state`, langgraph-sdk's
`update_state`), with the real client: later turns take them for the inputs their runs do not give, a run's
own value wins, null removes one, a turn from the command line takes them too; the state shows them, the
write is recorded (`blockyard threads show`), a copy of the thread keeps them, and what is not an input the
thread keeps is a 422 (docs/langgraph-api.md, "Writing a thread's state")."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from engine.core.events import now_iso
from engine.runtime.yard import Yard
from engine.serve.server import Settings
from engine.state import thread_inputs
from tests.serve.serve_helpers import Live, start_live
from tests.support.cli import Cli

# a conversation whose reply says the thread's tone and count: what each turn ran with
ECHO = """
block: echo
kind: transform
inputs: {message: {type: string}, tone: {type: string}, count: {type: integer}}
outputs: {reply: {type: string}}
compute: {reply: "tone ~ ' x' ~ count ~ ': ' ~ message"}
"""
FLOW = """
flow: toned
inputs:
  message: {type: string}
  tone: {type: string, default: plain}
  count: {type: integer, default: 1}
outputs: [reply]
steps:
  - id: say
    uses: echo
    with: {message: "{{ inputs.message }}", tone: "{{ inputs.tone }}", count: "{{ inputs.count }}"}
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("yard")
    for name, text in {"blocks/echo.yaml": ECHO, "flows/toned.yaml": FLOW}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def live(root: Path) -> Iterator[Live]:
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def lg(live: Live) -> Any:
    return get_sync_client(url=live.url + "/lg")


def reply(client: Any, thread: str, text: str, **inputs: Any) -> str:
    """One turn on the thread; its reply."""
    values = client.runs.wait(
        thread, "toned", input={"messages": [{"type": "human", "content": text}], **inputs}
    )
    assert "__error__" not in values, values
    said: str = values["messages"][-1]["content"]
    return said


def test_written_inputs_are_what_later_turns_run_with_unless_they_say_otherwise(
    live: Live,
) -> None:
    client = lg(live)
    thread = client.threads.create(graph_id="toned")["thread_id"]
    assert reply(client, thread, "hi") == "plain x1: hi"  # the flow's defaults

    done = client.threads.update_state(thread, {"tone": "formal", "count": 3})
    assert done["checkpoint"]["thread_id"] == thread
    state = client.threads.get_state(thread)
    # shown in the state at once
    assert (state["values"]["tone"], state["values"]["count"]) == ("formal", 3)
    assert reply(client, thread, "again") == "formal x3: again"
    assert reply(client, thread, "now", tone="casual") == "casual x3: now"  # the run's own wins
    assert reply(client, thread, "and") == "formal x3: and"

    client.threads.update_state(thread, {"tone": None})  # no longer written: the default again
    assert client.threads.get_state(thread)["values"].get("tone") is None
    assert reply(client, thread, "last") == "plain x3: last"

    # recorded: every write, by what and when (Blockyard's own GET /threads/{id}; `blockyard threads show`)
    with live.client() as http:
        written = http.get(f"/threads/{thread}").json()["inputs"]
    assert written["values"] == {"count": 3}
    assert [w["values"] for w in written["writes"]] == [
        {"tone": "formal", "count": 3},
        {"tone": None},
    ]
    assert {w["by"] for w in written["writes"]} == {"POST /threads/{id}/state"}

    # a copy keeps them; the original goes on apart
    copy = client.threads.copy(thread)["thread_id"]
    assert reply(client, copy, "copied") == "plain x3: copied"


def test_a_write_with_messages_and_inputs_writes_both(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create(graph_id="toned")["thread_id"]
    conversation = [
        {"type": "human", "content": "seeded"},
        {"type": "ai", "content": "from elsewhere"},
    ]
    client.threads.update_state(thread, {"messages": conversation, "tone": "dry"})
    assert reply(client, thread, "next") == "dry x1: next"
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["content"] for m in messages] == ["seeded", "from elsewhere", "next", "dry x1: next"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mood": "x"}, "values.mood: not an input of flow 'toned'"),
        ({"message": "x"}, "values.message: the message each turn says"),
        ({"count": "many"}, "values: 'count' must be an integer"),
        ({"tone": "x", "messages": [{"type": "human", "content": "alone"}]}, "has no reply"),
    ],
)
def test_what_a_thread_does_not_keep_is_a_422_and_nothing_is_written(
    live: Live, values: dict[str, Any], message: str
) -> None:
    client = lg(live)
    thread = client.threads.create(graph_id="toned")["thread_id"]
    with pytest.raises(httpx.HTTPStatusError, match=re.escape(message)) as refused:
        client.threads.update_state(thread, values)
    assert refused.value.response.status_code == 422
    assert reply(client, thread, "hi") == "plain x1: hi"  # nothing was written


def test_a_turn_from_the_command_line_takes_them_too(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    """The engine's own path (`blockyard run --thread`, the Python API), not the server's."""
    root = make_yard({"blocks/echo.yaml": ECHO, "flows/toned.yaml": FLOW})
    assert cli(root, "run", "toned", "--thread", "t1", "--input", "message=one").code == 0
    with Yard.load(root) as yard:
        yard.engine.db.writer.call_sync(  # what POST /threads/{id}/state writes
            thread_inputs.write("t1", {"tone": "dry"}, "a test", None, now_iso())
        )
    ran = cli(root, "run", "toned", "--thread", "t1", "--input", "message=two")
    assert ran.code == 0, ran.err
    assert ran.out == "reply: 'dry x1: two'\n"
    shown = cli(root, "threads", "show", "t1")
    assert 'inputs    tone="dry"  (written ' in shown.out and "by a test; 1 write)" in shown.out
    written = json.loads(cli(root, "threads", "show", "t1", "--json").out)["inputs"]
    assert written["values"] == {"tone": "dry"} and written["writes"][0]["by"] == "a test"
