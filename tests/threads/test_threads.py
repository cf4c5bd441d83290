"""Conversation threads: each turn adds its message and its reply exactly once, turns of one thread
never overlap (in one process or several), a waiting turn holds the thread, and finished turns
leave one checkpoint behind."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from tests.runtime.conftest import spawn
from tests.support.cli import Cli
from tests.support.state import state_db

FILES = {
    "blocks/answer.yaml": """
        block: answer
        kind: transform
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        compute: {reply: "'you said: ' ~ message"}
    """,
    "blocks/mark.yaml": """
        block: mark
        kind: transform
        inputs: {message: {type: string}}
        outputs: {marked: {type: string}}
        compute: {marked: "message"}
    """,
    "blocks/nap.yaml": "block: nap\nkind: wait\nduration: 300ms\n",
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - id: only_first
            router:
              value: "{{ inputs.message }}"
              routes: [{starts_with: first, goto: mark}]
              default: answer
          - {id: mark, uses: mark, goto: end}
          - {id: answer, uses: answer}
    """,
    "flows/slow_chat.yaml": """
        flow: slow_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: nap, uses: nap}
          - {id: answer, uses: answer}
    """,
    "flows/careful_chat.yaml": """
        flow: careful_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: ok, approval: {message: "Answer {{ inputs.message }}?"}}
          - {id: answer, uses: answer}
    """,
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


def messages(api: Yard, flow: str, thread: str) -> list[tuple[str, str, str]]:
    """(kind, id, text) of the messages stored in the thread's checkpoint."""

    async def read() -> Any:
        compiled = api.compiled(api.bundle(flow))
        return await compiled.graph.aget_state({"configurable": {"thread_id": thread}})

    state = api._sync().call(read)
    return [(type(m).__name__, str(m.id), str(m.content)) for m in state.values["messages"]]


def checkpoints(root: Path, thread: str) -> int:
    with state_db(root) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread,)
            ).fetchone()[0]
        )


def test_n_turns_give_exactly_n_turns_of_history(yard: Path) -> None:
    turns = 6
    with Yard.load(yard) as api:
        results = [
            api.run(
                "chat",
                {"message": f"opening words {i}" if i == 0 else f"follow-up {i}"},
                thread="t1",
            )
            for i in range(turns)
        ]
        assert [r.status for r in results] == ["finished"] * turns
        stored = messages(api, "chat", "t1")
        (thread,) = api.threads()
    assert len(stored) == 2 * turns
    assert len({message_id for _, message_id, _ in stored}) == 2 * turns
    assert [kind for kind, _, _ in stored] == ["HumanMessage", "AIMessage"] * turns
    for i, result in enumerate(results[1:], 1):
        assert stored[2 * i][1:] == (f"{result.run_id}.in", f"follow-up {i}")
        assert stored[2 * i + 1][1:] == (f"{result.run_id}.out", f"you said: follow-up {i}")
    assert (thread.id, thread.flow, thread.turns, thread.label, thread.last_run) == (
        "t1",
        "chat",
        turns,
        "opening words 0",
        results[-1].run_id,
    )
    assert checkpoints(yard, "t1") == 1  # finished turns are pruned down to the latest checkpoint


def test_each_turn_starts_from_a_fresh_context(yard: Path, cli: Cli) -> None:
    with Yard.load(yard) as api:
        first = api.run("chat", {"message": "first turn"}, thread="t2")
        # the first turn took the `mark` branch only: no reply, so it failed on its missing output
        assert first.status == "failed" and "without output 'reply'" in (first.error or "")
        second = api.run("chat", {"message": "hello"}, thread="t2")
        assert second.outputs == {"reply": "you said: hello"}

        async def context() -> dict[str, Any]:
            compiled = api.compiled(api.bundle("chat"))
            state = await compiled.graph.aget_state({"configurable": {"thread_id": "t2"}})
            return dict(state.values["context"])

        assert api._sync().call(context) == {
            "reply": "you said: hello"
        }  # no `marked` from the first turn
        refused = cli(yard, "resume", first.run_id)
        assert refused.code == 2
        assert refused.err.strip() == (
            f"error: run {first.run_id} cannot be resumed: its conversation thread 't2' "
            f"has gone on with run {second.run_id}"
        )


def test_concurrent_turns_of_one_thread_take_turns(yard: Path) -> None:
    async def three(api: Yard) -> list[Any]:
        return await asyncio.gather(
            *(api.arun("slow_chat", {"message": f"m{i}"}, thread="busy") for i in range(3))
        )

    with Yard.load(yard) as api:
        results = api._sync().call(lambda: three(api))
        assert [r.status for r in results] == ["finished"] * 3
        stored = messages(api, "slow_chat", "busy")
    assert len(stored) == 6
    # each reply right after its own message
    for human, ai in zip(stored[::2], stored[1::2], strict=True):
        assert human[0] == "HumanMessage" and ai[0] == "AIMessage"
        assert ai[1] == human[1].replace(".in", ".out") and ai[2] == "you said: " + human[2]


def test_turns_from_two_processes_at_once(yard: Path, cli: Cli) -> None:
    # an existing conversation (and database: two processes creating a fresh one at once is another matter)
    assert cli(yard, "run", "slow_chat", "--thread", "shared", "--input", "message=hello").code == 0
    children = [
        spawn(
            yard, "run", "slow_chat", "--thread", "shared", "--input", f"message=from {i}", "--json"
        )
        for i in range(2)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    with Yard.load(yard) as api:
        stored = messages(api, "slow_chat", "shared")
    assert sorted(text for kind, _, text in stored if kind == "HumanMessage") == [
        "from 0",
        "from 1",
        "hello",
    ]
    assert [kind for kind, _, _ in stored] == ["HumanMessage", "AIMessage"] * 3
    listed = cli(yard, "threads", "--json")
    (thread,) = json.loads(listed.out)
    assert (thread["id"], thread["turns"], thread["status"]) == ("shared", 3, "finished")


def test_a_waiting_turn_holds_the_thread(yard: Path, cli: Cli) -> None:
    waiting = cli(yard, "run", "careful_chat", "--thread", "c1", "--input", "message=hi", "--json")
    assert waiting.code == 3
    run_id = waiting.events()[0]["run_id"]
    blocked = cli(yard, "run", "careful_chat", "--thread", "c1", "--input", "message=again")
    assert blocked.code == 2
    assert blocked.err.strip() == (
        f"error: thread 'c1' waits for an approval in run {run_id}: decide it first "
        f"(`blockyard resume {run_id} --approve` or `--reject`)"
    )
    assert cli(yard, "resume", run_id, "--approve").code == 0
    assert cli(yard, "run", "careful_chat", "--thread", "c1", "--input", "message=again").code == 3
    other = cli(yard, "run", "chat", "--thread", "c1", "--input", "message=x")
    assert (other.code, other.err.strip()) == (
        2,
        "error: thread 'c1' is a conversation with flow 'careful_chat', not 'chat'",
    )


def test_threads_listing_and_show(yard: Path, cli: Cli) -> None:
    assert cli(yard, "threads").out.startswith("no threads yet")
    for text in (
        "what is on the menu today, and is there anything vegetarian on it at all",
        "and soup?",
    ):
        assert (
            cli(yard, "run", "chat", "--thread", "lunch-chat", "--input", f"message={text}").code
            == 0
        )
    listed = cli(yard, "threads").out.splitlines()
    assert listed[0].split() == ["THREAD", "FLOW", "TURNS", "UPDATED", "LAST", "TURN", "TITLE"]
    # the title is the thread's name: the first five words of its first message (no naming model here)
    assert listed[1].startswith("lunch-chat  chat  2") and listed[1].endswith(
        "  what is on the menu"
    )
    shown = cli(yard, "threads", "show", "lunch-chat").out
    assert "  > and soup?\n  < you said: and soup?\n" in shown
    missing = cli(yard, "threads", "show", "lunch-chta")
    assert (missing.code, missing.err.strip()) == (
        2,
        "error: unknown thread 'lunch-chta' (did you mean 'lunch-chat'?)",
    )


def test_a_threads_turns_are_shown_in_the_order_they_were_taken(yard: Path, cli: Cli) -> None:
    with Yard.load(yard) as api:
        for run_id, text in (
            ("zz-first", "first things first"),
            (None, "then this"),
            ("00-last", "and that"),
        ):
            api.run("chat", {"message": text}, run_id=run_id, thread="menu")
            time.sleep(0.002)  # start times have milliseconds: each turn its own
    shown = json.loads(cli(yard, "threads", "show", "menu", "--json").out)
    assert [turn["said"] for turn in shown["turns"]] == [
        "first things first",
        "then this",
        "and that",
    ]
