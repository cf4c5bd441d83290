"""`blockyard serve` driven by the JavaScript client, `@langchain/langgraph-sdk` from npm (pinned), in Node.

One `node` process (sdk_client.cjs) makes the calls a chat UI makes — search assistants, create a thread, a
streamed run in the values/updates/messages-tuple modes, a second turn, the thread's state, an approval gate
as an interrupt resumed with `command: {resume: ...}` — and prints what it saw as JSON; this test asserts it.
The package is installed into the test cache by tests/support/npm.py. Without node or npm the test skips,
and fails under `CI=true` (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import skip_or_fail
from tests.serve.serve_helpers import Live
from tests.support.npm import npm_package

SDK_VERSION = "2.0.0"
SCRIPT = Path(__file__).with_name("sdk_client.cjs")
REPLY = "Thanks for writing to ACME support. How can I help you today?"


def run_js_client(live: Live) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        skip_or_fail("the JavaScript client test needs node (`apt-get install -y nodejs npm`)")
        raise AssertionError("unreachable")
    prefix = npm_package("@langchain/langgraph-sdk", SDK_VERSION)
    env = {key: value for key, value in os.environ.items() if key != "LANGGRAPH_API_KEY"}
    if live.server.settings.token:
        env["LANGGRAPH_API_KEY"] = live.server.settings.token
    done = subprocess.run(
        [node, str(SCRIPT), str(prefix), live.url + "/lg"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def test_the_javascript_client_searches_streams_and_resumes_a_gate(live: Live) -> None:
    seen = run_js_client(live)
    assert {"support_chat", "gated", "hello"} <= set(seen["assistants"])
    assert seen["gated"] == ["gated"]
    thread = seen["thread"]["id"]
    assert seen["thread"]["status"] == "idle" and seen["thread"]["metadata"] == {"user": "ada"}

    stream = seen["stream"]
    assert stream["first"]["event"] == "metadata" and stream["first"]["data"]["thread_id"] == thread
    assert {"values", "updates", "messages"} <= set(stream["events"])
    assert stream["tokens"] == REPLY
    assert stream["updates"] == [{"answer": {"reply": REPLY}}]
    assert [m["content"] for m in stream["last_values"]["messages"]] == ["My name is Ada", REPLY]
    assert seen["second_turn"] == "Your name is Ada."  # the thread carried turn one
    assert seen["chat_state"]["messages"] == [
        ["human", "My name is Ada"],
        ["ai", REPLY],
        ["human", "What is my name?"],
        ["ai", "Your name is Ada."],
    ]
    assert seen["chat_state"]["next"] == []

    # branching: Bob's branch from the thread's start knows no Ada; the regenerated answer on Ada's does
    branching = seen["branching"]
    assert branching["edited"][0] == "My name is Bob" and len(branching["edited"]) == 2
    assert branching["asked_again"][:3] == [
        "My name is Bob",
        branching["edited"][1],
        "What is my name?",
    ]
    assert branching["asked_again"][3] != "Your name is Ada."
    assert branching["regenerated"] == [
        "My name is Ada",
        REPLY,
        "What is my name?",
        "Your name is Ada.",
    ]
    # four turns and a regenerated answer: an input and an end each (the regenerated one an end), the start
    assert branching["history"] == 4 * 2 + 1 + 1 and branching["from_start"] == 2
    copied = seen["copied"]
    assert copied["id"] != thread and copied["messages"] == branching["regenerated"]
    assert copied["after_write"] == [*branching["regenerated"], "Thanks", "Welcome."]
    assert copied["original"] == branching["regenerated"]  # the copy goes on apart

    asked = seen["interrupt"]
    assert asked["value"]["message"] == "Add how much?" and "b" in asked["value"]["fields"]
    assert asked["state_next"] == ["ask"] and asked["state_interrupt_ids"] == [asked["id"]]
    assert asked["status"] == "interrupted"
    assert seen["wrong_resume"]["status"] == 422, seen["wrong_resume"]
    assert seen["resumed"]["events"][0] == "metadata" and seen["resumed"]["last"]["total"] == 6
    assert seen["done_state"]["values"]["total"] == 6
    assert seen["done_state"]["next"] == [] and seen["done_state"]["tasks"] == []
    assert seen["done_status"] == "idle"
    assert "missing_item" in seen and seen["missing_item"] is None

    assert seen["cron"]["made"] == ["hello", "0 9 * * 1", "UTC", True]
    assert seen["cron"]["listed"] == [seen["cron"]["id"]]
    assert seen["cron"]["after_delete"] == 0

    # double texting: reject refuses, enqueue waits, interrupt keeps what it stops, rollback deletes it
    ids = seen["multitask_ids"]
    assert seen["rejected"]["status"] == 409
    assert seen["enqueued"] == "pending"
    assert seen["after_interrupt"] == {"going": "interrupted", "queued": "interrupted"}
    assert seen["after_rollback"] == [
        [ids["rolling"], "success"],
        [ids["queued"], "interrupted"],
        [ids["going"], "interrupted"],
    ]
