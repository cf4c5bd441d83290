"""Conversations on the offline mock: the model is sent the thread so far (once), each finished
turn adds exactly its message and its reply — in the checkpoint the model reads and in the
messages table people read, which always agree — and a thread gets a name on its first turn."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Yard
from engine.definitions.project import load_project
from engine.models import StructuredRequest, TurnRequest
from engine.models.script import scripted
from engine.validate.semantic import check_project
from tests.runtime.conftest import subprocess_env
from tests.support import processes
from tests.support.cli import Cli
from tests.support.state import state_db


def structured(call: StructuredRequest | TurnRequest) -> StructuredRequest:
    """A scripted model call of an llm/decide step (what it was sent)."""
    assert isinstance(call, StructuredRequest)
    return call


def turn(call: StructuredRequest | TurnRequest) -> TurnRequest:
    """A scripted model call of an agent step."""
    assert isinstance(call, TurnRequest)
    return call


MESSAGE = {"message": {"type": "string"}}

FILES = {
    "blockyard.yaml": """
        models:
          default:
            provider: mock
            replies:
              helper: [{$text: "Checking.", $tool_calls: [{name: list_files, args: {}}]}, "All quiet."]
              boss: [{$tool_calls: [{name: inner, args: {message: "ask the expert"}}]}, "Delegated."]
    """,
    "blocks/reply.yaml": """
        block: reply
        kind: llm
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {system: "You are helpful.", user: "{{ message }}"}
    """,
    "blocks/recent.yaml": """
        block: recent
        kind: llm
        history: 1
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "blocks/blind.yaml": """
        block: blind
        kind: llm
        history: none
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "blocks/helper.yaml": """
        block: helper
        kind: agent
        tools: [list_files]
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "blocks/boss.yaml": """
        block: boss
        kind: agent
        delegates: [inner]
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "flows/inner.yaml": """
        flow: inner
        description: Asks the expert.
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: reply}
    """,
    "flows/llm_chat.yaml": """
        flow: llm_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: reply}
    """,
    "flows/window_chat.yaml": """
        flow: window_chat
        inputs: {message: {type: string}}
        outputs: [reply, other]
        steps:
          - {id: short, uses: recent}
          - {id: none, uses: blind, outputs: {reply: other}}
    """,
    "flows/agent_chat.yaml": """
        flow: agent_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: helper}
    """,
    "flows/delegate_chat.yaml": """
        flow: delegate_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: boss}
    """,
    "flows/sub_chat.yaml": """
        flow: sub_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: sub, flow: inner, with: {message: "{{ inputs.message }}"}}
    """,
    "flows/map_chat.yaml": """
        flow: map_chat
        inputs: {message: {type: string}}
        outputs: [all]
        steps:
          - id: each
            map: {items: "[inputs.message, inputs.message ~ '!']", as: m, uses: reply, with: {message: "{{ m }}"},
                  collect: all}
    """,
    "flows/loop_chat.yaml": """
        flow: loop_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - id: again
            loop:
              max_iterations: 2
              until: "false"
              on_exhausted: continue
              steps:
                - {id: talk, uses: reply}
    """,
    "flows/careful_chat.yaml": """
        flow: careful_chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: ok, approval: {message: "Answer {{ inputs.message }}?"}}
          - {id: talk, uses: reply}
    """,
}
FLOWS = [
    "llm_chat",
    "agent_chat",
    "delegate_chat",
    "sub_chat",
    "map_chat",
    "loop_chat",
    "careful_chat",
]
FAIL = {
    key: [{"$error": "boom", "message": "the model fell over"}]
    for key in ("reply", "helper", "boss")
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


def stored(api: Yard, flow: str, thread: str) -> list[tuple[str, str, str]]:
    """(type, id, text) of the messages in the checkpoint the thread's next turn starts from (its last
    finished turn's): what its models read."""
    start = api.db.read(
        lambda conn: conn.execute(
            "SELECT checkpoint FROM threads WHERE id = ?", (thread,)
        ).fetchone()
    )
    if start is None or start[0] is None:
        return []
    configurable = {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": start[0]}

    async def read() -> Any:
        return await api.compiled(api.bundle(flow)).graph.aget_state({"configurable": configurable})

    state = api._sync().call(read)
    return [(m.type, str(m.id), str(m.content)) for m in (state.values or {}).get("messages", [])]


def table(api: Yard, thread: str) -> list[tuple[str, str, str]]:
    """(role, run id, text) of the thread's rows in the messages table: what people read."""
    return [(m.role, m.run_id, m.content) for m in api.history(thread, limit=1000)]


def agree(api: Yard, flow: str, thread: str) -> list[tuple[str, str, str]]:
    """The thread's messages, after checking that the checkpoint and the table hold the same ones."""
    rows = table(api, thread)
    kept = stored(api, flow, thread)
    assert [(m_type, text) for m_type, _, text in kept] == [
        ("human" if role == "user" else "ai", text) for role, _, text in rows
    ]
    assert [message_id for _, message_id, _ in kept] == [
        f"{run_id}.{'in' if role == 'user' else 'out'}" for role, run_id, _ in rows
    ]
    return rows


def test_append_reducer_trap_an_agent_thread_stores_each_message_once(yard: Path) -> None:
    # an agent's prompt, tool calls and results used to be appended to the thread's `messages`
    # next to the turn's own message and reply: 3 turns of an agent with a tool stored 15 messages
    with Yard.load(yard) as api:
        for i in range(3):
            assert (
                api.run("agent_chat", {"message": f"turn {i}"}, thread="trap").status == "finished"
            )

        async def latest() -> Any:
            graph = api.compiled(api.bundle("agent_chat")).graph
            return await graph.aget_state({"configurable": {"thread_id": "trap"}})

        kept = api._sync().call(latest).values["messages"]
        assert [m.type for m in kept] == [
            "human",
            "ai",
        ] * 3  # not 15: no prompt, tool call or result of the agent
        rows = agree(api, "agent_chat", "trap")
        thread = api.thread("trap")
        assert thread is not None and thread.last_run is not None
        events = api.events(thread.last_run)
    assert [role for role, _, _ in rows] == ["user", "assistant"] * 3
    assert [text for _, _, text in rows] == [
        "turn 0",
        "All quiet.",
        "turn 1",
        "All quiet.",
        "turn 2",
        "All quiet.",
    ]
    # the tool-call chatter stays in the turn's trace
    assert [
        e.data["status"] for e in events if e.type == "tool_call" and e.data["tool"] == "list_files"
    ] == ["started", "ok"]


def test_the_model_is_sent_the_conversation_once_oldest_first(yard: Path) -> None:
    with Yard.load(yard) as api:
        turns = ["My name is Ada", "I like tea", "What is my name?"]
        scripts = []
        for i, text in enumerate(turns):
            with scripted(f"r{i}", {"talk": [f"reply {i}"]}) as script:
                assert (
                    api.run("llm_chat", {"message": text}, run_id=f"r{i}", thread="ada").status
                    == "finished"
                )
            scripts.append(script)
        outside = api.run("llm_chat", {"message": "not a turn"})
    assert [structured(call).history for script in scripts for call in script.calls] == [
        (),
        (("user", "My name is Ada"), ("assistant", "reply 0")),
        (
            ("user", "My name is Ada"),
            ("assistant", "reply 0"),
            ("user", "I like tea"),
            ("assistant", "reply 1"),
        ),
    ]
    # the turn's own prompt comes after the history
    assert structured(scripts[2].calls[0]).user == "What is my name?"
    assert outside.status == "finished"


def test_agents_get_the_history_before_their_prompt_and_blocks_choose_how_much(yard: Path) -> None:
    with Yard.load(yard) as api:
        for i in range(3):
            with scripted(f"a{i}") as agent_script:
                api.run("agent_chat", {"message": f"agent {i}"}, run_id=f"a{i}", thread="ag")
            with scripted(f"w{i}") as window_script:
                api.run("window_chat", {"message": f"window {i}"}, run_id=f"w{i}", thread="win")
    first_turn = turn(agent_script.calls[0])
    assert [(m.type, m.content) for m in first_turn.messages] == [
        ("human", "agent 0"),
        ("ai", "All quiet."),
        ("human", "agent 1"),
        ("ai", "All quiet."),
        ("human", "agent 2"),
    ]
    short, blind = (structured(call) for call in window_script.calls)
    assert [said for said, _ in short.history] == [
        "user",
        "assistant",
    ]  # history: 1 -> the last turn only
    assert short.history[0] == ("user", "window 1")
    assert blind.history == ()  # history: none


def test_the_character_budget_drops_the_oldest_turns_and_says_so(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard({**FILES, "blockyard.yaml": "threads: {history_chars: 40}\n"})
    with Yard.load(root) as api:
        for i in range(3):
            with scripted(f"b{i}", {"talk": [f"r{i}"]}) as script:
                api.run(
                    "llm_chat", {"message": f"message number {i}"}, run_id=f"b{i}", thread="budget"
                )
        warnings = [e for e in api.events("b2") if e.type == "warning"]
        kept = stored(api, "llm_chat", "budget")
        rows = table(api, "budget")
    # each turn is 18 + 2 characters: two fit in 40, the third turn is sent the newest one only... and
    # turn 2's own one earlier turn (20 characters) fit
    assert structured(script.calls[0]).history == (
        ("user", "message number 0"),
        ("assistant", "r0"),
        ("user", "message number 1"),
        ("assistant", "r1"),
    )
    assert warnings == []
    with Yard.load(root) as api:
        with scripted("b3", {"talk": ["r3"]}) as script:
            api.run("llm_chat", {"message": "message number 3"}, run_id="b3", thread="budget")
        (warning,) = [e for e in api.events("b3") if e.type == "warning"]
        kept = stored(api, "llm_chat", "budget")
        rows = table(api, "budget")
    assert structured(script.calls[0]).history == (
        ("user", "message number 1"),
        ("assistant", "r1"),
        ("user", "message number 2"),
        ("assistant", "r2"),
    )
    assert (warning.step, warning.data["code"], warning.data["dropped_turns"]) == (
        "talk",
        "history_cut",
        1,
    )
    assert "threads.history_chars (40 characters)" in warning.data["message"]
    # the table keeps every message; the checkpoint only what can still be sent
    assert len(rows) == 8
    assert [text for _, _, text in kept] == [
        "message number 1",
        "r1",
        "message number 2",
        "r2",
        "message number 3",
        "r3",
    ]


def test_a_failed_turn_that_is_not_resumed_leaves_no_message(yard: Path) -> None:
    with Yard.load(yard) as api:
        api.run("llm_chat", {"message": "one"}, thread="f")
        with scripted("bad", FAIL):
            assert (
                api.run("llm_chat", {"message": "lost"}, run_id="bad", thread="f").status
                == "failed"
            )
        with scripted("next") as script:
            api.run("llm_chat", {"message": "two"}, run_id="next", thread="f")
        rows = agree(api, "llm_chat", "f")
    assert [text for role, _, text in rows if role == "user"] == ["one", "two"]
    assert [said for said, _ in structured(script.calls[0]).history] == [
        "user",
        "assistant",
    ]  # not "lost"


# ---- exactly once, whatever the flow and however its turns end ----------------------------------

OUTCOMES = ["ok", "fail_resume", "fail_abandon"]
_threads = itertools.count()


@pytest.fixture(scope="module")
def shared_yard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Yard]:
    root = tmp_path_factory.mktemp("conversation") / "yard"
    import textwrap

    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    with Yard.load(root) as api:
        yield api


def take_turn(api: Yard, flow: str, thread: str, text: str, outcome: str) -> bool:
    """One turn ending as `outcome`; whether it finished."""
    run_id = f"{thread}-{text}"
    if outcome == "ok":
        result = api.run(flow, {"message": text}, run_id=run_id, thread=thread)
    else:
        with scripted(run_id, FAIL):
            result = api.run(flow, {"message": text}, run_id=run_id, thread=thread)
        if result.status == "waiting":  # the approval comes before the model: decide it, then fail
            with scripted(run_id, FAIL):
                result = api.resume(run_id, approve=True)
        assert result.status == "failed", result
        if outcome == "fail_abandon":
            return False
        result = api.resume(run_id)  # the model is back
    if result.status == "waiting":
        result = api.resume(run_id, approve=True)
    assert result.status == "finished", result
    return True


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flow=st.sampled_from(FLOWS),
    outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=4),
)
def test_n_finished_turns_hold_exactly_2n_messages(
    shared_yard: Yard, flow: str, outcomes: list[str]
) -> None:
    thread = f"p{next(_threads)}"
    finished = [
        take_turn(shared_yard, flow, thread, f"m{i}", outcome) for i, outcome in enumerate(outcomes)
    ]
    rows = agree(shared_yard, flow, thread)
    assert len(rows) == 2 * sum(finished)
    assert [text for role, _, text in rows if role == "user"] == [
        f"m{i}" for i, done in enumerate(finished) if done
    ]
    assert [role for role, _, _ in rows] == ["user", "assistant"] * sum(finished)


# ---- names ------------------------------------------------------------------------------------

NAMED = (
    "models:\n  default: {provider: mock}\n  namer: {provider: mock, replies: {thread_name: [%s]}}\n"
    "threads: {name_model: namer}\n"
)


def test_a_thread_is_named_by_the_name_model_on_its_first_turn(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = make_yard({**FILES, "blockyard.yaml": NAMED % '"Title: Ada asks about her order."'})
    first = cli(
        root, "run", "llm_chat", "--thread", "named", "--input", "message=My name is Ada", "--json"
    )
    second = cli(
        root, "run", "llm_chat", "--thread", "named", "--input", "message=Where is it?", "--json"
    )
    (event,) = [e for e in first.events() if e["type"] == "thread_name"]
    assert event["data"] == {"thread_id": "named", "name": "Ada asks about her order"}
    assert [e["type"] for e in first.events()][-1] == "run_finished"
    assert not [
        e for e in second.events() if e["type"] == "thread_name"
    ]  # only the first turn names it
    listed = json.loads(cli(root, "threads", "--json").out)
    assert listed[0]["name"] == "Ada asks about her order"
    assert cli(root, "threads").out.splitlines()[1].endswith("  Ada asks about her order")


def test_without_a_name_model_or_when_it_fails_the_first_five_words_name_the_thread(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    root = make_yard({**FILES, "blockyard.yaml": NAMED % "{$error: boom}"})
    done = cli(
        root,
        "run",
        "llm_chat",
        "--thread",
        "late",
        "--input",
        "message=  My order  is late, where is it?",
        "--json",
    )
    events = done.events()
    assert done.code == 0
    assert [e["data"] for e in events if e["type"] == "thread_name"] == [
        {"thread_id": "late", "name": "My order is late, where"}
    ]
    assert events[-1]["type"] == "run_finished"
    with Yard.load(root) as api:
        assert api.thread("late").label == "My order is late, where"  # type: ignore[union-attr]
    plain = make_yard({**FILES, "blockyard.yaml": "models: {default: {provider: mock}}\n"})
    done = cli(
        plain, "run", "llm_chat", "--thread", "p", "--input", "message=hello there", "--json"
    )
    assert [e["data"]["name"] for e in done.events() if e["type"] == "thread_name"] == [
        "hello there"
    ]


def test_the_offline_mock_names_a_thread_the_same_way_every_time(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    config = "models:\n  default: {provider: mock}\nthreads: {name_model: default}\n"
    root = make_yard({**FILES, "blockyard.yaml": config})
    names = []
    with Yard.load(root) as api:
        for thread in ("x1", "x2"):
            api.run("llm_chat", {"message": "My name is Ada"}, thread=thread)
            names.append(api.thread(thread).label)  # type: ignore[union-attr]
    assert names[0] == names[1] and 1 <= len(names[0].split()) <= 5


def test_threads_show_reads_the_messages_table(yard: Path, cli: Cli) -> None:
    assert cli(yard, "run", "llm_chat", "--thread", "s", "--input", "message=hello").code == 0
    with scripted("s-bad", FAIL), Yard.load(yard) as api:
        api.run("llm_chat", {"message": "oops"}, run_id="s-bad", thread="s")
    with state_db(yard) as conn:
        conn.execute("UPDATE messages SET content = 'hello (from the table)' WHERE role = 'user'")
    shown = cli(yard, "threads", "show", "s").out
    assert "  > hello (from the table)\n  < " in shown
    assert "run s-bad\n  > oops\n  (failed: " in shown
    body = json.loads(cli(yard, "threads", "show", "s", "--json").out)
    assert [(m["index"], m["role"]) for m in body["messages"]] == [(0, "user"), (1, "assistant")]


# ---- kill -9 at random points -----------------------------------------------------------------


def test_kill_9_at_random_points_never_leaves_the_table_and_the_checkpoint_disagreeing(
    yard: Path,
) -> None:
    chance = random.Random()
    child_script = Path(__file__).with_name("turns_child.py")
    first = 0
    for _round in range(4):
        child = processes.Popen(
            [sys.executable, str(child_script), str(yard), "agent_chat", "k", str(first), "50"],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "finished", (
            child.stderr.read() if child.stderr else ""
        )
        # somewhere inside a later turn: a step, the turn's end, the next start
        delay = chance.uniform(0.0, 0.25)
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        first += 50
        with Yard.load(yard) as api:
            rows = agree(api, "agent_chat", "k")
            finished = [
                run for run in api.runs(flow="agent_chat", limit=None) if run.status == "finished"
            ]
        assert len(rows) == 2 * len(finished), f"killed after {delay:.3f} s"
        assert {run_id for _, run_id, _ in rows} == {run.id for run in finished}
    with Yard.load(yard) as api:  # the thread goes on where the last finished turn left it
        assert api.run("agent_chat", {"message": "after"}, thread="k").status == "finished"
        rows = agree(api, "agent_chat", "k")
    assert rows[-2][2] == "after" and len(rows) == 2 * (len(finished) + 1)


def test_validate_names_history_on_a_kind_without_a_model_and_an_unknown_name_model(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard(
        {
            "blockyard.yaml": "models: {fast: {provider: mock}}\nthreads: {name_model: fsat, history_chars: 5000}\n",
            "blocks/shout.yaml": """
            block: shout
            kind: transform
            history: 3
            inputs: {text: {type: string}}
            outputs: {loud: {type: string}}
            compute: {loud: "text | upper"}
        """,
            "blocks/talk.yaml": "block: talk\nkind: llm\nhistory: all\noutputs: {reply: {type: string}}\n"
            "prompt: {user: hi}\n",
        }
    )
    project = load_project(root)
    # a key of another kind is refused by the kind's model, as the block is read (docs/validation.md)
    found = {
        (d.code, d.file, d.line, d.message) for d in [*project.diagnostics, *check_project(project)]
    }
    assert (
        "BY356",
        "blocks/shout.yaml",
        3,
        "block 'shout': `history` does not apply to a transform block "
        "(only to agent, decide, llm, smart)",
    ) in found
    assert (
        "BY502",
        "blockyard.yaml",
        2,
        "threads.name_model: unknown model profile 'fsat' (did you mean "
        "'fast'?) (profiles: default, fast)",
    ) in found
    assert not [d for d in found if d[1] == "blocks/talk.yaml"]
