"""Tokens of a real OpenAI-compatible server's streamed reply reach the SSE stream of a run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from serve_helpers import Live, read_sse
from support.openai_stub import OpenAIStub, Reply

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


def test_the_run_stream_carries_the_tokens_of_an_llm_block(make_yard: Callable[[dict[str, str]], Path],
                                                          serve: Callable[..., Live], stub: OpenAIStub) -> None:
    root = make_yard({"blockyard.yaml": f"models:\n  default: {{provider: openai, name: m, base_url: "
                                        f"'{stub.base_url}'}}\n",
                      "blocks/answer.yaml": BLOCK, "flows/ask.yaml": FLOW})
    text = "Streamed over server-sent events, piece by piece."
    stub.queue(Reply.structured_output({"answer": text}))
    live = serve(root, watch=False, schedules=False)
    with live.client() as client, client.stream("POST", "/flows/ask/runs", json={"inputs": {"question": "Hi"}},
                                                headers=STREAM) as response:
        assert response.status_code == 200
        messages = read_sse(response)
    kinds = [m["event"] for m in messages]
    tokens = [m["data"] for m in messages if m["event"] == "token"]
    assert len(tokens) > 3 and "".join(t["data"]["text"] for t in tokens) == text
    assert kinds.index("step_started") < kinds.index("token") < kinds.index("step_finished")
    assert messages[-1]["data"]["data"]["outputs"] == {"answer": text}
