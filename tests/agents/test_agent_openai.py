"""Agents against a loopback server speaking the OpenAI chat API, through the real langchain-openai
client and the real runtime: tool calls, parallel sub-agents, hybrid routing, the turn bound,
failing tools, malformed calls and streamed tokens."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.agents.agent_kit import (
    PLANTED_KEY,
    answer,
    calls,
    offered,
    run_flow,
    stub_config,
    system_of,
)
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply

HELPER = """
    block: helper
    kind: agent
    description: Answers a question with tools.
    inputs: {question: {type: string}}
    outputs: {answer: {type: string}}
    prompt:
      system: You are the helper.
      user: "{{ question }}"
    tools: [current_time, explode]
    max_iterations: 4
"""
ASK = """
    flow: ask
    inputs: {question: {type: string}}
    outputs: [answer]
    steps:
      - {id: lead, uses: helper}
"""
BOOM = '''
def explode(reason: str = "boom") -> str:
    """Always fails."""
    raise ValueError(reason)
'''
TOOLS = 'paths: {code: tools}\ntools:\n  explode: {import: "boom:explode"}\n'


def helper_yard(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub, **files: str
) -> Path:
    return make_yard(
        {
            "blockyard.yaml": stub_config(stub, TOOLS),
            "tools/boom.py": BOOM,
            "blocks/helper.yaml": HELPER,
            "flows/ask.yaml": ASK,
            **files,
        }
    )


def test_a_tool_call_then_an_answer(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(calls(("current_time", {"timezone": "Europe/Paris"})), answer(answer="It is late."))
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "What time is it?"})

    assert done.outputs == {"answer": "It is late."}
    first, second = stub.requests
    assert offered(first) == ["current_time", "explode", "final_answer"]
    assert first.body["stream"] is True
    tool_turn = second.messages[-1]
    assert tool_turn["role"] == "tool" and tool_turn["tool_call_id"] == "call_0"
    assert '"timezone": "Europe/Paris"' in tool_turn["content"]
    started, finished, answered = done.of("tool_call")
    assert answered.data == {
        "tool": "final_answer",
        "args": {"answer": "It is late."},
        "call_id": "call_0",
        "kind": "answer",
        "status": "ok",
        "block": "helper",
    }
    assert (started.step, started.data["tool"], started.data["status"]) == (
        "lead",
        "current_time",
        "started",
    )
    assert started.data["args"] == {"timezone": "Europe/Paris"} and started.data["kind"] == "tool"
    assert finished.data["status"] == "ok" and finished.data["result"]["timezone"] == "Europe/Paris"
    kinds = [type(m) for m in done.messages()]
    assert kinds == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
    ]  # the run's `messages`: no system prompt
    assert done.messages()[1].name == "lead"
    assert done.messages()[-1].tool_calls[0]["args"] == {"answer": "It is late."}
    # the stub reuses its completion id; ours are fresh
    assert len({m.id for m in done.messages()}) == 4


COORDINATOR = """
    block: coordinator
    kind: agent
    inputs: {topic: {type: string}}
    outputs: {summary: {type: string}}
    prompt:
      system: You are the coordinator.
      user: "Cover {{ topic }}"
    tools: [current_time]
"""
RESEARCHER = """
    block: researcher
    kind: agent
    description: Finds facts about a topic.
    inputs: {topic: {type: string}}
    outputs: {facts: {type: string}}
    prompt:
      system: You are the researcher.
      user: "Facts about {{ topic }}"
"""
WRITER = """
    block: writer
    kind: agent
    description: Writes a note into the workspace.
    inputs: {text: {type: string}, style: {type: string}}
    outputs: {path: {type: string}}
    prompt:
      system: You are the writer.
      user: "Write {{ text }} in a {{ style }} style"
    tools: [write_file]
"""
TEAM = """
    flow: team
    inputs: {topic: {type: string}}
    outputs: [summary]
    steps:
      - id: lead
        uses: coordinator
        delegates: [research, write]
      - id: research
        uses: researcher
      - id: write
        uses: writer
        with: {style: terse}
"""


def team_yard(make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub) -> Path:
    return make_yard(
        {
            "blockyard.yaml": stub_config(stub),
            "blocks/coordinator.yaml": COORDINATOR,
            "blocks/researcher.yaml": RESEARCHER,
            "blocks/writer.yaml": WRITER,
            "flows/team.yaml": TEAM,
        }
    )


def test_two_sub_agents_asked_in_one_turn_run_in_parallel(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    both = threading.Barrier(2, timeout=10)  # each sub-agent's first request waits for the other's
    writer_turns: list[int] = []

    def respond(request: RecordedRequest) -> Reply:
        system = system_of(request)
        if system == "You are the coordinator.":
            if len(request.messages) == 2:
                return calls(("research", {"topic": "bees"}), ("write", {"text": "bees buzz"}))
            return answer(summary="Bees: researched and written down.")
        if system == "You are the researcher.":
            both.wait()
            return answer(facts="Bees dance.")
        writer_turns.append(len(request.messages))
        if len(writer_turns) == 1:
            both.wait()
            return calls(("write_file", {"path": "notes/bees.md", "content": "Bees buzz."}))
        return answer(path="notes/bees.md")

    stub.default = Reply.dynamic(respond)
    done = run_flow(team_yard(make_yard, stub), "team", {"topic": "bees"})

    assert done.outputs == {"summary": "Bees: researched and written down."}, done.error
    assert (done.workspace() / "notes" / "bees.md").read_text() == "Bees buzz."
    lead = done.tool_calls("lead")
    assert [(d["tool"], d["kind"], d["status"]) for d in lead[:2]] == [
        ("research", "step", "started"),
        ("write", "step", "started"),
    ]
    assert {d["tool"]: d["result"] for d in lead[2:]} == {
        "research": {"facts": "Bees dance."},
        "write": {"path": "notes/bees.md"},
    }
    # the delegated steps ran as steps of their own (events), with `with:` and the model's arguments
    assert done.of("step_started", "write")[0].data["inputs"] == {
        "text": "bees buzz",
        "style": "terse",
    }
    assert [e.step for e in done.of("step_finished")][-1] == "lead"
    # each result came back as a tool message, in the order of the calls
    last = [r for r in stub.requests if system_of(r) == "You are the coordinator."][-1]
    assert [(m["role"], m.get("tool_call_id")) for m in last.messages[-2:]] == [
        ("tool", "call_0"),
        ("tool", "call_1"),
    ]
    # the sub-agents are offered as tools, next to the coordinator's own
    first = stub.requests[0]
    assert offered(first) == ["current_time", "research", "write", "final_answer"]
    schema = first.body["tools"][2]["function"]["parameters"]
    # `with:` binds style
    assert schema["required"] == ["text"] and "style" not in schema["properties"]
    # delegated steps leave the flow's order: they ran once each, as sub-agents only
    assert len(done.of("step_started", "research")) == 1


def test_a_call_matching_no_sub_agent_goes_to_the_tool_node(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    def respond(request: RecordedRequest) -> Reply:
        system = system_of(request)
        if system == "You are the researcher.":
            return answer(facts="Bees dance.")
        if len(request.messages) == 2:
            return calls(
                ("research", {"topic": "bees"}), ("current_time", {}), ("teleport", {"to": "Mars"})
            )
        return answer(summary="done")

    stub.default = Reply.dynamic(respond)
    done = run_flow(team_yard(make_yard, stub), "team", {"topic": "bees"})

    assert done.outputs == {"summary": "done"}, done.error
    results = {
        e.data["tool"]: e.data
        for e in done.of("tool_call", "lead")
        if e.data["status"] != "started"
    }
    assert results["research"]["status"] == "ok"
    assert (
        results["current_time"]["status"] == "ok"
        and results["current_time"]["result"]["timezone"] == "UTC"
    )
    assert results["teleport"]["status"] == "error"
    assert results["teleport"]["error"] == (
        "there is no tool 'teleport'; you can call: current_time, research, write, final_answer"
    )
    kinds = {
        e.data["tool"]: e.data["kind"]
        for e in done.of("tool_call", "lead")
        if e.data["status"] == "started"
    }
    assert kinds == {"research": "step", "current_time": "tool", "teleport": "tool"}
    last = stub.requests[-1].messages
    assert [m["content"][:6] for m in last[-3:]] == ['{"fact', '{"now"', "error:"]


def test_max_iterations_exhausted(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.default = calls(("current_time", {}))  # the model never stops calling tools
    done = run_flow(
        helper_yard(make_yard, stub, **{"blocks/helper.yaml": HELPER.replace("4", "3")}),
        "ask",
        {"question": "?"},
    )

    assert done.error == (
        "agent 'helper' gave no final answer within max_iterations (3 turns): its last turn "
        "called 'current_time' instead of final_answer"
    )
    assert (done.last.step, done.last.data["block"]) == ("lead", "helper")
    assert len(stub.requests) == 3
    last = stub.requests[-1]
    assert offered(last) == ["final_answer"] and last.body["tool_choice"] == "required"
    assert "This is your last turn (max_iterations: 3)" in last.messages[-1]["content"]
    assert (
        done.of("step_failed", "lead")[0]
        .data["error"]
        .startswith("agent 'helper' gave no final answer")
    )
    # two turns of calls were run; the third's was not
    assert len(done.of("tool_call", "lead")) == 4


def test_a_tool_that_raises_returns_its_error_to_the_model(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(
        calls(("explode", {"reason": "disk on fire"})), answer(answer="The tool failed; sorry.")
    )
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "?"})

    assert done.outputs == {"answer": "The tool failed; sorry."}
    error = stub.requests[1].messages[-1]
    assert error["role"] == "tool"
    assert error["content"] == "error: tool 'explode' failed: ValueError: disk on fire"
    failed = done.tool_calls("lead")[-1]
    assert (failed["status"], failed["error"]) == (
        "error",
        "tool 'explode' failed: ValueError: disk on fire",
    )


def test_too_many_failed_tool_calls_fail_the_step(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(
        calls(("explode", {}), ("explode", {"reason": "again"})),
        calls(("explode", {}), ("current_time", {}), ("explode", {"reason": "last"})),
    )
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "?"})

    assert done.error == (
        "agent 'helper' gave up after 4 failed tool calls (at most 3 are allowed); the last: "
        "tool 'explode' failed: ValueError: last"
    )
    assert len(stub.requests) == 2


def test_a_malformed_tool_call_is_answered_with_an_error(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(
        Reply(tool_calls=[("current_time", '{"timezone": "Europe/')]),
        calls(("current_time", {"zone": 1})),
        answer(answer="fixed"),
    )
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "?"})

    assert done.outputs == {"answer": "fixed"}
    broken = stub.requests[1].messages
    # sent back as it was
    assert broken[-2]["tool_calls"][0]["function"]["arguments"] == '{"timezone": "Europe/'
    assert broken[-1]["role"] == "tool" and broken[-1]["tool_call_id"] == "call_0"
    assert broken[-1]["content"] == (
        "error: the arguments of 'current_time' are not a JSON object: '{\"timezone\": \"Europe/'"
    )
    invalid = stub.requests[2].messages[-1]["content"]
    assert invalid == (
        "error: tool 'current_time': invalid arguments: Additional properties are not allowed "
        "('zone' was unexpected)"
    )


def test_tokens_stream_as_events(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    text = "Quarter past nine, by the clock tower."
    stub.queue(Reply.text(text))  # a plain text reply is the answer of a block with one text output
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "Time?"})

    assert done.outputs == {"answer": text}
    tokens = done.of("token", "lead")
    assert len(tokens) > 3  # the stub sends 7 characters per chunk
    assert "".join(e.data["text"] for e in tokens) == text
    assert {e.data["block"] for e in tokens} == {"helper"}


def test_a_rejected_answer_is_repaired_on_the_next_turn(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(answer(answer=42), answer(answer="forty-two"))
    done = run_flow(helper_yard(make_yard, stub), "ask", {"question": "?"})

    assert done.outputs == {"answer": "forty-two"}
    repair = stub.requests[1].messages[-1]
    assert repair["role"] == "tool"
    assert repair["content"] == "error: output 'answer' must be a string, got integer 42"


def test_the_api_key_stays_out_of_the_state_the_trace_and_the_events(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    stub.queue(calls(("current_time", {})))
    stub.default = Reply.error_reply(500, f"upstream echoed {PLANTED_KEY}")  # on every retry too
    root = helper_yard(
        make_yard,
        stub,
        **{
            "blocks/helper.yaml": HELPER.replace(
                "max_iterations: 4", "max_iterations: 4\n    retry: {attempts: 2, initial: 10ms}"
            )
        },
    )
    done = run_flow(root, "ask", {"question": "?"})

    # it was really used
    assert stub.requests[0].headers["authorization"] == f"Bearer {PLANTED_KEY}"
    assert done.error is not None and "***" in done.error  # the echo was masked
    everything = "".join(event.to_json() for event in done.events)
    for path in (root / ".blockyard").rglob("*"):
        if path.is_file():
            everything += path.read_bytes().decode("latin-1")
    assert PLANTED_KEY not in everything


def test_agent_turns_on_azure(
    make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub
) -> None:
    config = (
        f"models:\n  default:\n    provider: azure\n    name: prod-gpt\n    base_url: http://127.0.0.1:{stub.port}"
        f"\n    api_version: '2024-10-21'\n    api_key_env: AGENT_STUB_KEY\n"
    )
    stub.queue(calls(("current_time", {})), answer(answer="on azure"))
    done = run_flow(
        make_yard(
            {
                "blockyard.yaml": config,
                "blocks/helper.yaml": HELPER.replace(", explode", ""),
                "flows/ask.yaml": ASK,
            }
        ),
        "ask",
        {"question": "?"},
    )

    assert done.outputs == {"answer": "on azure"}, done.error
    assert stub.requests[0].path.startswith("/openai/deployments/prod-gpt/chat/completions")
    assert stub.requests[0].headers["api-key"] == PLANTED_KEY
