"""Branches of a conversation thread (engine/state/branches.py): a turn may go on from any finished turn
of its thread, or from none. The model is sent exactly its branch's conversation, each turn's rows are
stored once, the next plain turn goes on from the newest finished turn, and readers see that branch."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Yard
from engine.core.errors import UsageError
from engine.models import StructuredRequest
from engine.models.script import scripted
from engine.state import branches, thread_copy
from engine.state.threads import Thread
from engine.state.writer import Write
from tests.support.cli import Cli

FILES = {
    "blockyard.yaml": "models:\n  default: {provider: mock}\n",
    "blocks/reply.yaml": """
        block: reply
        kind: llm
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "{{ message }}"}
    """,
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: reply}
    """,
    "flows/other.yaml": """
        flow: other
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: talk, uses: reply}
    """,
}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Yard]:
    root = tmp_path / "yard"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    with Yard.load(root) as loaded:
        yield loaded


def say(
    api: Yard, run_id: str, text: str, thread: str = "t", after: str | None = None
) -> tuple[tuple[str, str], ...]:
    """Run one turn (its reply: `reply <run id>`); what its model was sent of the conversation."""
    with scripted(run_id, {"talk": [f"reply {run_id}"]}) as script:
        done = api.run("chat", {"message": text}, run_id=run_id, thread=thread, after=after)
    assert done.status == "finished", done.error
    (call,) = script.calls
    assert isinstance(call, StructuredRequest) and call.user == text
    return call.history


def shown(api: Yard, thread: str = "t") -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in api.history(thread, limit=100)]


def test_a_turn_goes_on_from_an_earlier_turn_and_the_next_one_from_it(api: Yard) -> None:
    say(api, "r0", "My name is Ada")
    say(api, "r1", "I like tea")
    # an edited second message: it goes on from the first turn, not from the second
    assert say(api, "e1", "I like coffee", after="r0") == (
        ("user", "My name is Ada"),
        ("assistant", "reply r0"),
    )
    # a plain turn goes on from the newest finished turn: the branch just made
    assert say(api, "e2", "What do I like?") == (
        ("user", "My name is Ada"),
        ("assistant", "reply r0"),
        ("user", "I like coffee"),
        ("assistant", "reply e1"),
    )
    assert shown(api) == [
        ("user", "My name is Ada"),
        ("assistant", "reply r0"),
        ("user", "I like coffee"),
        ("assistant", "reply e1"),
        ("user", "What do I like?"),
        ("assistant", "reply e2"),
    ]
    # every turn's rows are stored once: the shared first turn is not copied
    count = api.db.read(
        lambda conn: conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = 't'").fetchone()
    )
    assert count[0] == 8
    assert api.db.read(lambda conn: branches.path(conn, "e2")) == ["r0", "e1", "e2"]
    # the old branch is still there to go on from
    assert say(api, "o2", "And my name?", after="r1")[-2:] == (
        ("user", "I like tea"),
        ("assistant", "reply r1"),
    )
    assert [text for _, text in shown(api)][2:4] == ["I like tea", "reply r1"]


def test_a_turn_from_the_start_is_a_new_first_turn(api: Yard) -> None:
    say(api, "r0", "My name is Ada")
    say(api, "r1", "What is my name?")
    assert say(api, "s0", "My name is Bob", after=branches.START) == ()
    assert say(api, "s1", "What is my name?") == (
        ("user", "My name is Bob"),
        ("assistant", "reply s0"),
    )
    assert api.db.read(lambda conn: branches.path(conn, "s1")) == ["s0", "s1"]
    thread = api.db.read(
        lambda conn: conn.execute("SELECT turns, last_run FROM threads WHERE id = 't'").fetchone()
    )
    assert tuple(thread) == (4, "s1")  # every turn counts; the latest is the newest branch's


def test_going_on_from_the_latest_turn_is_a_plain_turn(api: Yard) -> None:
    say(api, "r0", "one")
    assert say(api, "r1", "two", after="r0") == (("user", "one"), ("assistant", "reply r0"))
    assert api.db.read(lambda conn: branches.path(conn, "r1")) == ["r0", "r1"]


def test_a_turn_goes_on_only_from_a_finished_turn_of_its_own_thread(api: Yard) -> None:
    say(api, "r0", "one")
    say(api, "x0", "elsewhere", thread="other-thread")
    with scripted("bad", {"talk": ["never"]}):
        with pytest.raises(UsageError, match="has no turn 'x0'"):
            api.run("chat", {"message": "two"}, run_id="bad", thread="t", after="x0")
        with pytest.raises(UsageError, match="has no turn 'nope'"):
            api.run("chat", {"message": "two"}, run_id="bad", thread="t", after="nope")
        with pytest.raises(UsageError, match="only in a conversation thread"):
            api.run("chat", {"message": "two"}, run_id="bad", after="r0")
    # a failed turn is not part of any conversation
    with scripted("f1", {"talk": [{"$error": "the model is down"}]}):
        failed = api.run("chat", {"message": "two"}, run_id="f1", thread="t")
    assert failed.status == "failed"
    with (
        scripted("bad2", {"talk": ["never"]}),
        pytest.raises(UsageError, match="turn 'f1' of thread 't' did not finish"),
    ):
        api.run("chat", {"message": "two"}, run_id="bad2", thread="t", after="f1")
    # nothing was recorded by the refused turns
    assert (
        api.db.read(
            lambda conn: conn.execute("SELECT COUNT(*) FROM runs WHERE id LIKE 'bad%'").fetchone()
        )[0]
        == 0
    )


def test_the_cli_goes_on_from_an_earlier_turn_and_shows_the_new_branch(api: Yard, cli: Cli) -> None:
    root = api.root
    for run_id, text in (("c0", "one"), ("c1", "two")):
        assert (
            cli(
                root,
                "run",
                "chat",
                "--thread",
                "c",
                "--run-id",
                run_id,
                "--input",
                f"message={text}",
            ).code
            == 0
        )
    branched = cli(
        root,
        "run",
        "chat",
        "--thread",
        "c",
        "--after",
        "c0",
        "--run-id",
        "c2",
        "--input",
        "message=deux",
    )
    assert branched.code == 0, branched.err
    shown = cli(root, "threads", "show", "c", "--json")
    assert [m["content"] for m in json.loads(shown.out)["messages"] if m["role"] == "user"] == [
        "one",
        "deux",
    ]
    refused = cli(root, "run", "chat", "--after", "c0", "--input", "message=x")
    assert refused.code == 2 and "--after names a turn" in refused.err
    unknown = cli(root, "run", "chat", "--thread", "c", "--after", "zz", "--input", "message=x")
    assert unknown.code == 2 and "has no turn 'zz'" in unknown.err


def test_a_copied_threads_first_turn_that_died_before_its_checkpoint_starts_over_on_its_branch(
    api: Yard,
) -> None:
    say(api, "r0", "My name is Ada")
    say(api, "r1", "I like tea")
    copied = api.db.writer.call_sync(thread_copy.copy("t", "c", "2026-11-28T00:00:00.000Z"))
    assert isinstance(copied, Thread) and copied.turns == 2
    # a turn recorded and admitted whose process died before LangGraph wrote its first checkpoint: started
    # on the yard's own loop (an execution belongs to it) and never executed, its owner then dead
    api._sync().call(
        lambda: api.engine.start(api.bundle("chat"), {"message": "And?"}, run_id="x", thread="c")
    )
    api.db.writer.write_sync(
        Write("UPDATE runs SET owner_pid = ?, owner_start = NULL WHERE id = 'x'", (2**22 + 17,))
    )
    with scripted("x", {"talk": ["reply x"]}) as script:
        assert api.resume("x").status == "finished"
    (call,) = script.calls
    assert isinstance(call, StructuredRequest)
    assert [text for _, text in call.history] == [
        "My name is Ada",
        "reply r0",
        "I like tea",
        "reply r1",
    ]
    assert [text for _, text in shown(api, "c")][-2:] == ["And?", "reply x"]


def test_after_a_branch_turn_failed_a_plain_turn_goes_on_on_that_branch(api: Yard) -> None:
    say(api, "r0", "My name is Ada")
    say(api, "r1", "I like tea")
    with scripted("b1", {"talk": [{"$error": "the model is down"}]}):
        failed = api.run("chat", {"message": "I like coffee"}, run_id="b1", thread="t", after="r0")
    assert failed.status == "failed"
    # the thread is on the branch the failed turn went on from: its message is in no conversation
    assert say(api, "b2", "I like cocoa") == (("user", "My name is Ada"), ("assistant", "reply r0"))
    assert api.db.read(lambda conn: branches.path(conn, "b2")) == ["r0", "b2"]
    # a failed plain turn leaves the thread where it was, as before branches
    with scripted("f3", {"talk": [{"$error": "down again"}]}):
        assert api.run("chat", {"message": "x"}, run_id="f3", thread="t").status == "failed"
    assert say(api, "b4", "And now?")[-2:] == (("user", "I like cocoa"), ("assistant", "reply b2"))
