"""Agents in flows on the offline mock: scripted tool calls, maps, block and flow delegates, retries
of sub-agents, and what the compiler refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from engine.compile import compile_flow
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from tests.agents.agent_kit import run_flow

Yard = Callable[[dict[str, str]], Path]

AGENT = """
    block: {name}
    kind: agent
    description: The {name} agent.
    inputs: {{task: {{type: string}}, tone: {{type: string, default: plain}}}}
    outputs: {{answer: {{type: string}}}}
    prompt: {{user: "{{{{ task }}}} ({{{{ tone }}}})"}}
    {extra}
"""


def agent(name: str, extra: str = "") -> str:
    return AGENT.format(name=name, extra=extra)


def mock_config(replies: str = "{}") -> str:
    return f"models:\n  default:\n    provider: mock\n    replies: {replies}\n"


def test_scripted_tool_calls_text_and_the_messages_of_the_run(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": mock_config(
                '{lead: [{$text: "Let me check.", $tool_calls: [{name: list_files, args: {}}]},'
                ' {$text: "All quiet."}]}'
            ),
            "blocks/solo.yaml": agent("solo", "tools: [list_files]"),
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n  - {id: lead, uses: solo, with: {task: look}}\n",
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "All quiet."}
    messages = done.messages()
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert messages[0].content == "look (plain)"
    assert messages[2].content == '{"entries": [], "truncated": false}'
    assert "".join(e.data["text"] for e in done.of("token", "lead")) == "Let me check.All quiet."


def test_an_unscripted_mock_agent_answers_at_once(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/solo.yaml": agent("solo", "tools: [current_time]"),
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n  - {id: lead, uses: solo, with: {task: hi}}\n",
        }
    )
    done = run_flow(root, "one", env={})

    assert done.outputs == {"answer": "solo: task=hi, tone=plain"}
    assert [e.data["kind"] for e in done.of("tool_call")] == ["answer"]


def test_agents_as_map_items(make_yard: Yard) -> None:
    root = make_yard(
        {
            # replies are used in order across the run: each item's first turn calls the tool
            "blockyard.yaml": mock_config(
                "{solo: [{$tool_calls: [{name: current_time, args: {}}]},"
                " {$tool_calls: [{name: current_time, args: {}}]}, done]}"
            ),
            "blocks/solo.yaml": agent("solo", "tools: [current_time]"),
            "flows/fan.yaml": """
            flow: fan
            inputs: {tasks: {type: array}}
            outputs: [all]
            steps:
              - id: each
                map: {items: inputs.tasks, as: task, uses: solo, collect: all}
        """,
        }
    )
    done = run_flow(root, "fan", {"tasks": ["a", "b"]})

    assert done.outputs is not None and len(done.outputs["all"]) == 2
    assert sorted(
        e.data["index"] for e in done.of("tool_call", "each") if e.data["status"] == "started"
    ) == [0, 1]


def test_a_blocks_delegates_see_only_their_arguments_and_defaults(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": mock_config(
                "{boss: [{$tool_calls: [{name: aide, args: {task: sort}}]}, done],"
                " aide: [{answer: sorted}]}"
            ),
            "blocks/boss.yaml": agent("boss", "delegates: [aide]"),
            "blocks/aide.yaml": agent("aide"),
            "flows/one.yaml": """
            flow: one
            inputs: {tone: {type: string}}
            outputs: [answer]
            steps:
              - {id: lead, uses: boss, with: {task: work}}
        """,
        }
    )
    done = run_flow(root, "one", {"tone": "loud"})

    assert done.outputs == {"answer": "done"}
    started = done.of("step_started", "lead.aide")[0]
    assert started.data["inputs"] == {
        "task": "sort",
        "tone": "plain",
    }  # not the flow's input 'tone'
    assert done.tool_calls("lead")[-1]["result"] == {"answer": "sorted"}


def test_a_failing_flow_delegate_is_an_error_for_the_model_not_the_run(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": mock_config(
                "{lead: [{$tool_calls: [{name: sums, args: {n: 1}}, {name: sums, args: {}}]},"
                " recovered]}"
            ),
            "blocks/boss.yaml": agent("boss"),
            "blocks/half.yaml": """
            block: half
            kind: transform
            inputs: {n: {type: integer}}
            outputs: {h: {type: integer}}
            compute: {h: "n // (n - 1)"}
        """,
            "flows/sums.yaml": "flow: sums\ndescription: Halves.\ninputs: {n: {type: integer}}\noutputs: [h]\n"
            "steps:\n  - {id: halve, uses: half}\n",
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n"
            "  - {id: lead, uses: boss, with: {task: t}, delegates: [sums]}\n",
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "recovered"}
    errors = sorted(
        e.data["error"] for e in done.of("tool_call", "lead") if e.data["status"] == "error"
    )
    assert errors[0].startswith(
        "flow 'sums' failed: flow 'sums' failed at step 'lead.sums.halve': compute 'h':"
    )
    assert errors[1] == "flow 'sums': invalid arguments: 'n' is a required property"
    assert (
        done.of("step_failed", "lead.sums")[0]
        .data["error"]
        .startswith("flow 'sums' failed at step")
    )


def test_a_sub_agent_that_fails_for_a_moment_is_retried(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": mock_config(
                "{lead: [{$tool_calls: [{name: aide, args: {task: x}}]}, fine],"
                " aide: [{$error: rate_limit}, {$error: rate_limit}, helped]}"
            ),
            "blocks/boss.yaml": agent("boss", "delegates: [aide]"),
            "blocks/aide.yaml": agent("aide", "retry: {attempts: 3, initial: 10ms}"),
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n  - {id: lead, uses: boss, with: {task: t}}\n",
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "fine"}
    retries = [e for e in done.of("warning") if e.data["code"] == "retrying"]
    assert [e.step for e in retries] == ["lead.aide", "lead.aide"]
    assert done.tool_calls("lead")[-1]["result"] == {"answer": "helped"}


def test_an_agent_step_in_a_loop_body_delegates_to_a_sibling(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blockyard.yaml": mock_config(
                "{lead: [{$tool_calls: [{name: aide_step, args: {task: y}}]}, ok]}"
            ),
            "blocks/boss.yaml": agent("boss"),
            "blocks/aide.yaml": agent("aide"),
            "flows/one.yaml": """
            flow: one
            outputs: [answer]
            steps:
              - id: rounds
                loop:
                  max_iterations: 2
                  steps:
                    - {id: lead, uses: boss, with: {task: t}, delegates: [aide_step]}
                    - {id: aide_step, uses: aide}
        """,
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "ok"}
    assert [e.step for e in done.of("step_started")] == ["rounds", "lead", "aide_step", "lead"]


def test_events_carry_bounded_arguments_and_results(make_yard: Yard) -> None:
    text = "x" * 10_000
    replies = (
        "{lead: [{$tool_calls: [{name: write_file, args: {path: big.txt, content: '"
        + text
        + "'}}]},"
        " {$tool_calls: [{name: read_file, args: {path: big.txt}}]}, done]}"
    )
    root = make_yard(
        {
            "blockyard.yaml": mock_config(replies),
            "blocks/solo.yaml": agent("solo", "tools: [write_file, read_file]"),
            "flows/one.yaml": "flow: one\noutputs: [answer]\nsteps:\n  - {id: lead, uses: solo, with: {task: t}}\n",
        }
    )
    done = run_flow(root, "one")

    assert done.outputs == {"answer": "done"}
    started, _, _, read, answered = done.of("tool_call", "lead")
    assert answered.data["kind"] == "answer"
    assert isinstance(started.data["args"], str) and started.data["args"].endswith(
        "... [10034 characters]"
    )
    assert len(read.data["result"]) < 4_100
    assert (
        text
        in next(m for m in done.messages() if m.type == "tool" and m.name == "read_file").content
    )


def test_the_drawing_hangs_delegated_steps_off_their_agent(make_yard: Yard) -> None:
    root = make_yard(
        {
            "blocks/boss.yaml": agent("boss", "tools: [current_time]"),
            "blocks/aide.yaml": agent("aide"),
            "flows/one.yaml": "flow: one\nsteps:\n  - {id: lead, uses: boss, delegates: [helper]}\n"
            "  - {id: helper, uses: aide}\n  - {id: after, uses: aide}\n",
        }
    )
    drawing = compile_flow(make_bundle(load_project(root), "one")).mermaid()
    assert 'lead -.->|"delegates"| helper' in drawing
    assert "lead --> after" in drawing and "helper --> after" not in drawing
    assert "tools: helper, current_time" in drawing
