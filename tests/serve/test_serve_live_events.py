"""Live events over SSE: tokens of a real OpenAI-compatible server's streamed reply, and steps' custom events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.serve.serve_helpers import Live, read_sse
from tests.support.openai_stub import OpenAIStub, Reply

STREAM = {"Accept": "text/event-stream"}
BLOCK = """
block: answer
kind: llm
inputs: {question: {type: string}}
outputs: {answer: {type: string}}
prompt: {user: "{{ question }}"}
"""
FLOW = """
flow: ask
inputs: {question: {type: string}}
outputs: [answer]
steps:
  - {id: reply, uses: answer}
"""


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def test_the_run_stream_carries_the_tokens_of_an_llm_block(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], stub: OpenAIStub
) -> None:
    root = make_yard(
        {
            "blockyard.yaml": f"models:\n  default: {{provider: openai, name: m, base_url: "
            f"'{stub.base_url}'}}\n",
            "blocks/answer.yaml": BLOCK,
            "flows/ask.yaml": FLOW,
        }
    )
    text = "Streamed over server-sent events, piece by piece."
    stub.queue(Reply.structured_output({"answer": text}))
    live = serve(root, watch=False, schedules=False)
    with (
        live.client() as client,
        client.stream(
            "POST", "/flows/ask/runs", json={"inputs": {"question": "Hi"}}, headers=STREAM
        ) as response,
    ):
        assert response.status_code == 200
        messages = read_sse(response)
    kinds = [m["event"] for m in messages]
    tokens = [m["data"] for m in messages if m["event"] == "token"]
    assert len(tokens) > 3 and "".join(t["data"]["text"] for t in tokens) == text
    assert kinds.index("step_started") < kinds.index("token") < kinds.index("step_finished")
    assert messages[-1]["data"]["data"]["outputs"] == {"answer": text}


INC = """
block: inc
kind: transform
inputs: {n: {type: integer}}
outputs: {n: {type: integer}}
compute: {n: "n + 1"}
"""
COUNT = """
flow: count
outputs: [n]
steps:
  - id: one
    uses: inc
    with: {n: 41}
    emit: {event: progress, data: {done: "{{ context.n }}"}}
"""


def test_custom_events_reach_the_run_stream_and_the_replay(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(
        make_yard({"blocks/inc.yaml": INC, "flows/count.yaml": COUNT}), watch=False, schedules=False
    )
    with live.client() as client:
        with client.stream(
            "POST", "/flows/count/runs", json={"inputs": {}}, headers=STREAM
        ) as response:
            streamed = read_sse(response)
        run_id = streamed[0]["data"]["run_id"]
        with client.stream("GET", f"/runs/{run_id}/events", headers=STREAM) as response:
            replayed = read_sse(response)
    assert [m["event"] for m in streamed] == [
        "run_started",
        "step_started",
        "step_finished",
        "progress",
        "run_finished",
    ]
    progress = streamed[3]
    assert progress["data"]["type"] == "progress" and progress["data"]["step"] == "one"
    assert progress["data"]["data"] == {"done": 42}
    assert replayed == streamed
