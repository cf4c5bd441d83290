"""`approve_tools:` on agent blocks: a person decides before a tool call (approve, edit, reject), the run
waits as at any gate and resumes inside the agent's loop — the model is not asked again, and what it is
told of a rejection is the person's reason. Through the real OpenAI client against the stub, and on the
offline mock across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.runtime.yard import Yard
from engine.spec.decisions import DecisionRefused
from tests.agents.agent_kit import KEY_ENV, PLANTED_KEY, answer, calls, stub_config
from tests.support import processes
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply
from tests.support.state import database_bytes

MakeYard = Callable[[dict[str, str]], Path]

FILER = """
block: filer
kind: agent
inputs: {{topic: {{type: string}}}}
outputs: {{summary: {{type: string}}}}
prompt: {{user: "Write notes on {{{{ topic }}}}."}}
tools: [write_file, current_time]
approve_tools:
  write_file: {decisions}
"""
NOTES = """
flow: notes
durability: {durability}
inputs: {{topic: {{type: string, default: bees}}}}
outputs: [summary]
steps:
  - {{id: intro, uses: shout}}
  - {{id: lead, uses: filer}}
"""
SHOUT = """
block: shout
kind: transform
inputs: {topic: {type: string}}
outputs: {loud: {type: string}}
compute: {loud: "topic | upper"}
"""
WRITE = ("write_file", {"path": "notes.md", "content": "Bees dance."})


def _yard(
    make_yard: MakeYard,
    stub: OpenAIStub,
    decisions: str = "[approve, edit, reject]",
    durability: str = "sync",
) -> Path:
    return make_yard(
        {
            "blockyard.yaml": stub_config(stub),
            "blocks/filer.yaml": FILER.format(decisions=decisions),
            "blocks/shout.yaml": SHOUT,
            "flows/notes.yaml": NOTES.format(durability=durability),
        }
    )


def _load(root: Path) -> Yard:
    return Yard.load(root, env={KEY_ENV: PLANTED_KEY})


def _tool_events(yard: Yard, run_id: str) -> list[dict[str, Any]]:
    return [
        e.data
        for e in yard.events(run_id)
        if e.type == "tool_call" and e.data.get("kind") != "answer"
    ]


def _tool_messages(body: Any) -> list[str]:
    """The tool results a request sent to the model."""
    return [str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_approved_call_runs_as_asked_and_the_loop_goes_on_without_asking_the_model_again(
    make_yard: MakeYard, stub: OpenAIStub, durability: str
) -> None:
    root = _yard(make_yard, stub, durability=durability)
    stub.queue(calls(WRITE), answer(summary="Noted."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        assert waiting.status == "waiting"
        assert len(stub.requests) == 1
        (gate,) = yard.gates(waiting.run_id)
        assert gate.gate == "lead:write_file"
        request = gate.request
        assert request["kind"] == "tool" and request["tool"] == "write_file"
        assert request["args"] == WRITE[1]
        assert request["allowed"] == ["approve", "edit", "reject"]
        assert request["fields"]["path"]["default"] == "notes.md"
        assert request["fields"]["path"]["type"] == "string"
        assert request["message"] == (
            """agent 'filer' asks to call write_file(path="notes.md", content="Bees dance.")"""
        )
        assert _tool_events(yard, waiting.run_id) == []  # nothing ran before the decision

        done = yard.resume(waiting.run_id, approve=True, actor="ada")
        assert done.status == "finished", done.error
        assert done.outputs == {"summary": "Noted."}
        assert len(stub.requests) == 2  # the first turn was not asked again
        written = root / ".blockyard" / "workspaces" / waiting.run_id / "notes.md"
        assert written.read_text(encoding="utf-8") == "Bees dance."
        assert '"path": "notes.md"' in _tool_messages(stub.requests[1].body)[0]
        started, ended = _tool_events(yard, waiting.run_id)
        assert (started["status"], started["args"]) == ("started", WRITE[1])
        assert ended["status"] == "ok"
        decided = [e for e in yard.events(waiting.run_id) if e.type == "approval_decided"]
        assert decided[0].data["actor"] == "ada" and decided[0].data["values"] == WRITE[1]
        # the intro step ran once: the resumed run went on inside the agent's step
        intro = [e for e in yard.events(waiting.run_id) if e.type == "step_finished"]
        assert [e.step for e in intro] == ["intro", "lead"]


def test_an_edit_runs_the_call_with_the_changed_arguments(
    make_yard: MakeYard, stub: OpenAIStub
) -> None:
    root = _yard(make_yard, stub)
    stub.queue(calls(WRITE), answer(summary="Noted."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        done = yard.resume(waiting.run_id, approve=True, values={"path": "edited.md"})
        assert done.status == "finished", done.error
        workspace = root / ".blockyard" / "workspaces" / waiting.run_id
        assert sorted(p.name for p in workspace.iterdir()) == ["edited.md"]
        assert (workspace / "edited.md").read_text(encoding="utf-8") == "Bees dance."
        started = _tool_events(yard, waiting.run_id)[0]
        assert started["args"] == {"path": "edited.md", "content": "Bees dance."}


def test_a_rejection_runs_nothing_and_the_model_reads_the_reason(
    make_yard: MakeYard, stub: OpenAIStub
) -> None:
    root = _yard(make_yard, stub)
    stub.queue(calls(WRITE), answer(summary="Not written."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        done = yard.resume(waiting.run_id, approve=False, reason="not in that folder", actor="bob")
        assert done.status == "finished", done.error
        assert done.outputs == {"summary": "Not written."}
        assert not (root / ".blockyard" / "workspaces" / waiting.run_id / "notes.md").exists()
        told = _tool_messages(stub.requests[1].body)
        assert told == [
            "error: A person (bob) rejected this call of 'write_file', so it did not run: "
            "not in that folder"
        ]
        (rejected,) = _tool_events(yard, waiting.run_id)
        assert rejected["status"] == "rejected" and rejected["args"] == WRITE[1]
        # a person's decision, not a failed tool call: the step reports no tool errors
        finished = [e for e in yard.events(waiting.run_id) if e.type == "step_finished"]
        assert "tool_errors" not in finished[-1].data


@pytest.mark.parametrize(
    ("decisions", "approve", "values", "refused"),
    [
        ("[edit, reject]", True, None, "cannot be approved as asked: .* change its arguments"),
        ("[approve, reject]", True, {"path": "x.md"}, "cannot be edited: .* approve it as asked"),
        ("[approve]", False, None, "cannot be rejected: its block allows only to approve it"),
    ],
)
def test_a_decision_the_block_does_not_allow_is_refused_and_the_run_keeps_waiting(
    make_yard: MakeYard,
    stub: OpenAIStub,
    decisions: str,
    approve: bool,
    values: dict[str, Any] | None,
    refused: str,
) -> None:
    root = _yard(make_yard, stub, decisions=decisions)
    stub.queue(calls(WRITE), answer(summary="Noted."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        with pytest.raises(DecisionRefused, match=f"gate 'lead:write_file' {refused}"):
            yard.resume(waiting.run_id, approve=approve, values=values)
        assert yard.get_run(waiting.run_id).status == "waiting"  # type: ignore[union-attr]
        assert [g.status for g in yard.gates(waiting.run_id)] == ["waiting"]


def test_two_calls_in_one_turn_wait_as_two_gates_and_a_tool_not_listed_runs_at_once(
    make_yard: MakeYard, stub: OpenAIStub
) -> None:
    root = _yard(make_yard, stub)
    second = ("write_file", {"path": "b.md", "content": "B"})
    stub.queue(calls(WRITE, ("current_time", {}), second), answer(summary="Both."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        assert sorted(g.gate for g in yard.gates(waiting.run_id)) == [
            "lead:write_file",
            "lead:write_file#2",
        ]
        # current_time needs no one: it ran while the two writes wait
        assert [(e["tool"], e["status"]) for e in _tool_events(yard, waiting.run_id)] == [
            ("current_time", "started"),
            ("current_time", "ok"),
        ]
        still = yard.resume(waiting.run_id, approve=False, gate="lead:write_file#2")
        assert still.status == "waiting"
        done = yard.resume(waiting.run_id, approve=True, gate="lead:write_file")
        assert done.status == "finished", done.error
        assert len(stub.requests) == 2
        told = _tool_messages(stub.requests[1].body)
        assert len(told) == 3 and "rejected" in told[2]  # in the order the model made the calls
        workspace = root / ".blockyard" / "workspaces" / waiting.run_id
        assert sorted(p.name for p in workspace.iterdir()) == ["notes.md"]


def test_items_of_a_map_over_an_asking_agent_wait_each_at_its_own_gate(
    make_yard: MakeYard, stub: OpenAIStub
) -> None:
    def reply(request: RecordedRequest) -> Reply:
        # each item's agent: a write first, then its answer once it has read the write's result
        told = _tool_messages(request.body)
        return answer(summary=told[0][:12]) if told else calls(WRITE)

    stub.default = Reply.dynamic(reply)
    root = make_yard(
        {
            "blockyard.yaml": stub_config(stub),
            "blocks/filer.yaml": FILER.format(decisions="[approve, reject]"),
            "flows/each.yaml": "flow: each\ninputs: {topics: {type: array, default: [a, b]}}\n"
            "outputs: [notes]\nsteps:\n  - id: all\n"
            "    map: {items: inputs.topics, as: topic, uses: filer, collect: notes}\n",
        }
    )
    with _load(root) as yard:
        waiting = yard.run("each", {})
        assert waiting.status == "waiting", waiting.error
        gates = sorted(g.gate for g in yard.gates(waiting.run_id))
        assert gates == ["all[0]:write_file", "all[1]:write_file"]
        still = yard.resume(waiting.run_id, approve=True, gate="all[1]:write_file")
        assert still.status == "waiting"
        done = yard.resume(waiting.run_id, approve=False, gate="all[0]:write_file")
        assert done.status == "finished", done.error
        assert done.outputs == {"notes": [{"summary": "error: A per"}, {"summary": '{"path": "no'}]}
        assert len(stub.requests) == 4  # two turns per item, none asked again


def test_the_command_line_decides_a_tool_call_in_another_process(make_yard: MakeYard) -> None:
    replies = json.dumps(
        {
            "filer": [
                {"$tool_calls": [{"name": "write_file", "args": {"path": "a.md", "content": "A"}}]},
                {"summary": "done"},
            ]
        }
    )
    root = make_yard(
        {
            "blockyard.yaml": f"models:\n  default:\n    provider: mock\n    replies: {replies}\n",
            "blocks/filer.yaml": FILER.format(decisions="[approve, edit, reject]"),
            "blocks/shout.yaml": SHOUT,
            "flows/notes.yaml": NOTES.format(durability="sync"),
        }
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # a process of its own each time (forked by the suite's fork server: tests/support/processes.py)
        return processes.run(
            [sys.executable, "-m", "engine", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = cli("run", "notes")
    assert first.returncode == 3, first.stderr  # exit 3: the run waits for a decision
    assert "waiting for approval at gate 'lead:write_file'" in first.stderr
    assert """asks to call write_file(path="a.md", content="A")""" in first.stderr
    run_id = first.stderr.split()[1].rstrip(":")
    second = cli("resume", run_id, "--approve", "--set", "path=b.md")
    assert second.returncode == 0, second.stderr
    assert "wrote b.md (1 bytes)" in second.stderr
    assert f"run {run_id} finished" in second.stderr
    assert (root / ".blockyard" / "workspaces" / run_id / "b.md").read_text() == "A"


def test_a_sub_agent_that_asks_makes_its_coordinator_wait_and_both_go_on_where_they_were(
    make_yard: MakeYard,
) -> None:
    replies = {
        "boss": [{"$tool_calls": [{"name": "filer", "args": {"topic": "bees"}}]}, {"summary": "B"}],
        "filer": [
            {"$tool_calls": [{"name": "write_file", "args": {"path": "n.md", "content": "x"}}]},
            {"summary": "F"},
        ],
    }
    root = make_yard(
        {
            "blockyard.yaml": "models:\n  default:\n    provider: mock\n    replies: "
            + json.dumps(replies)
            + "\n",
            "blocks/filer.yaml": FILER.format(decisions="[approve, reject]"),
            "blocks/boss.yaml": "block: boss\nkind: agent\ninputs: {topic: {type: string}}\n"
            "outputs: {summary: {type: string}}\nprompt: {user: 'Notes on {{ topic }}.'}\n"
            "delegates: [filer]\n",
            "flows/lead.yaml": "flow: lead\ninputs: {topic: {type: string, default: bees}}\n"
            "outputs: [summary]\nsteps:\n  - {id: boss, uses: boss}\n",
        }
    )
    with Yard.load(root) as yard:
        waiting = yard.run("lead", {})
        assert [g.gate for g in yard.gates(waiting.run_id)] == ["boss.filer:write_file"]
        done = yard.resume(waiting.run_id, approve=True)
        assert done.status == "finished", done.error
        assert done.outputs == {"summary": "B"}
        asked = [e.step for e in yard.events(waiting.run_id) if e.type == "model_call"]
        # each agent's two turns, each asked once: neither loop started over on resume
        assert sorted(str(step) for step in asked) == ["boss", "boss", "boss.filer", "boss.filer"]
        assert (root / ".blockyard" / "workspaces" / waiting.run_id / "n.md").read_text() == "x"


def test_an_agent_delegating_to_a_flow_with_a_gate_waits_there_and_goes_on(
    make_yard: MakeYard,
) -> None:
    replies = {"boss": [{"$tool_calls": [{"name": "asked", "args": {}}]}, {"summary": "B"}]}
    root = make_yard(
        {
            "blockyard.yaml": "models:\n  default:\n    provider: mock\n    replies: "
            + json.dumps(replies)
            + "\n",
            "blocks/boss.yaml": "block: boss\nkind: agent\ninputs: {}\n"
            "outputs: {summary: {type: string}}\nprompt: {user: 'Ask.'}\ndelegates: [asked]\n",
            "blocks/shout.yaml": SHOUT,
            "flows/asked.yaml": "flow: asked\ndescription: Asks a person.\n"
            "inputs: {topic: {type: string, default: bees}}\noutputs: [loud]\nsteps:\n"
            "  - {id: ok, approval: {message: Go on?}}\n  - {id: say, uses: shout}\n",
            "flows/lead.yaml": "flow: lead\noutputs: [summary]\nsteps:\n  - {id: boss, uses: boss}\n",
        }
    )
    with Yard.load(root) as yard:
        waiting = yard.run("lead", {})
        assert waiting.status == "waiting", waiting.error
        assert [g.gate for g in yard.gates(waiting.run_id)] == ["boss.asked.ok"]
        done = yard.resume(waiting.run_id, approve=True)
        assert done.status == "finished", done.error
        asked = [e.step for e in yard.events(waiting.run_id) if e.type == "model_call"]
        assert asked == ["boss", "boss"]
        results = [
            e.data.get("result")
            for e in yard.events(waiting.run_id)
            if e.type == "tool_call" and e.data.get("status") == "ok"
        ]
        assert {"loud": "BEES"} in results


def test_a_key_the_model_echoes_in_a_call_waiting_for_a_person_is_masked(
    make_yard: MakeYard, stub: OpenAIStub
) -> None:
    root = _yard(make_yard, stub)
    leaked = ("write_file", {"path": "k.md", "content": f"the key is {PLANTED_KEY}"})
    stub.queue(calls(leaked), answer(summary="Noted."))
    with _load(root) as yard:
        waiting = yard.run("notes", {})
        (gate,) = yard.gates(waiting.run_id)
        assert gate.request["args"]["content"] == "the key is ***"
        assert gate.request["fields"]["content"]["default"] == "the key is ***"
        assert yard.resume(waiting.run_id, approve=True).status == "finished"
    # the gate, its events and the agent's own checkpoints: nowhere in the state database
    assert PLANTED_KEY.encode() not in database_bytes(root)
