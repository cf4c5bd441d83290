"""A model that echoes its API key does not put it anywhere: not in the state database (outputs,
checkpoints, the trace, memory — every byte of the file and its WAL), not in `blockyard run
--json` (streamed tokens included, where the key is split over pieces), not in `runs show`, not in
a failed run's error. Against the OpenAI stub on 127.0.0.1, through the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from tests.agents.agent_kit import KEY_ENV, PLANTED_KEY, answer, stub_config
from tests.support.openai_stub import OpenAIStub, Reply
from tests.support.state import database_bytes

Yard = Callable[[dict[str, str]], Path]

FILES = {
    "blocks/greeter.yaml": """
        block: greeter
        kind: llm
        description: Greets.
        inputs: {}
        outputs: {greeting: {type: string}}
        prompt: {user: Greet me.}
    """,
    "blocks/helper.yaml": """
        block: helper
        kind: agent
        description: Answers with tools.
        inputs: {question: {type: string}}
        outputs: {answer: {type: string}}
        prompt: {user: "{{ question }}"}
        tools: [current_time]
    """,
    "blocks/counter.yaml": """
        block: counter
        kind: llm
        description: Counts.
        inputs: {}
        outputs: {n: {type: integer}}
        prompt: {user: Count.}
        retry: {attempts: 1}
    """,
    "flows/leak.yaml": """
        flow: leak
        outputs: [greeting, answer]
        memory: {scope: team/leak}
        steps:
          - {id: greet, uses: greeter}
          - {id: lead, uses: helper, with: {question: "{{ context.greeting }}"}}
          - {id: keep, uses: save_to_memory, with: {memory_key: g, memory_value: "{{ context.greeting }}"}}
    """,
    "flows/bad.yaml": "flow: bad\noutputs: [n]\nsteps:\n  - {id: count, uses: counter}\n",
}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out + err


def _database_bytes(root: Path) -> bytes:
    return database_bytes(root)


def test_an_echoed_key_is_masked_everywhere(
    make_yard: Yard,
    stub: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    root = make_yard({"blockyard.yaml": stub_config(stub), **FILES})
    stub.queue(
        Reply.structured_output({"greeting": f"your key is {PLANTED_KEY}"}),
        # streamed in pieces of 7 characters: the key is split over several tokens
        Reply(
            content=f"I was given {PLANTED_KEY} today.",
            tool_calls=[("current_time", json.dumps({"timezone": PLANTED_KEY}))],
        ),
        answer(answer=f"The key: {PLANTED_KEY}"),
    )
    code, out = _cli(capsys, "run", "leak", "--root", str(root), "--json")

    assert code == 0, out
    assert len(stub.requests) == 3
    # it was the key in use
    assert stub.requests[0].headers["authorization"] == f"Bearer {PLANTED_KEY}"
    assert PLANTED_KEY not in out
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events[-1]["data"]["outputs"] == {
        "greeting": "your key is ***",
        "answer": "The key: ***",
    }
    tokens = "".join(e["data"]["text"] for e in events if e["type"] == "token")
    # the llm reply and the agent's final answer stream too (their single text output): masked as well
    assert tokens == "your key is ***I was given *** today.The key: ***"
    failed = [
        e["data"] for e in events if e["type"] == "tool_call" and e["data"]["status"] == "error"
    ]
    assert len(failed) == 1 and "***" in failed[0]["error"]
    run_id = events[0]["run_id"]

    code, shown = _cli(capsys, "runs", "show", run_id, "--root", str(root))
    assert code == 0 and PLANTED_KEY not in shown and "your key is ***" in shown
    code, shown_json = _cli(capsys, "runs", "show", run_id, "--root", str(root), "--json")
    assert code == 0 and PLANTED_KEY not in shown_json
    code, memory = _cli(capsys, "memory", "get", "team/leak", "g", "--root", str(root))
    assert code == 0 and "your key is ***" in memory

    data = _database_bytes(root)
    assert b"your key is ***" in data  # the outputs are stored, masked
    assert PLANTED_KEY.encode() not in data


def test_an_error_that_quotes_the_key_is_masked(
    make_yard: Yard,
    stub: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    root = make_yard({"blockyard.yaml": stub_config(stub), **FILES})
    stub.default = Reply.structured_output({"n": f"not a number but {PLANTED_KEY}"})
    code, out = _cli(capsys, "run", "bad", "--root", str(root), "--json")

    assert code == 1
    assert PLANTED_KEY not in out
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "run_failed" and "***" in events[-1]["data"]["error"]
    code, shown = _cli(capsys, "runs", "show", events[0]["run_id"], "--root", str(root))
    assert PLANTED_KEY not in shown and "***" in shown
    assert PLANTED_KEY.encode() not in _database_bytes(root)
