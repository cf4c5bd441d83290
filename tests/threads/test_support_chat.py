"""The support_chat example of the repository's yard holds a conversation offline: turn 3 ("What is
my name?") is answered from the history, by a mock reply whose rule fires only when "Ada" is in
what the model was sent. On the CLI (in-process: no process boundary is the point here), with
the example's flow tests, and as the README shows it. Over HTTP: tests/serve/test_serve_threads.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Yard
from engine.core.errors import UsageError
from tests.support.cli import Cli
from tests.support.example import copy_example_yard

REPO = Path(__file__).resolve().parents[2]
GREETING = "Thanks for writing to ACME support. How can I help you today?"


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy_example_yard(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


def test_three_turns_on_the_cli_answer_from_the_history(example: Path, cli: Cli) -> None:
    said = ("My name is Ada", "My order 123 is late", "What is my name?")
    replies = []
    for message in said:
        done = cli(example, "run", "support_chat", "--thread", "T", "--input", f"message={message}")
        assert done.code == 0, done.err
        replies.append(done.out)
    assert replies == [f"reply: {GREETING}\n", f"reply: {GREETING}\n", "reply: Your name is Ada.\n"]
    shown = json.loads(cli(example, "threads", "show", "T", "--json").out)
    assert [(m["role"], m["content"]) for m in shown["messages"]] == [
        ("user", said[0]),
        ("assistant", GREETING),
        ("user", said[1]),
        ("assistant", GREETING),
        ("user", said[2]),
        ("assistant", "Your name is Ada."),
    ]
    assert shown["thread"]["name"] == "My name is Ada"


def test_without_the_history_the_name_is_not_known(example: Path, cli: Cli) -> None:
    # the same third message in a thread that never said the name, and outside any thread
    for extra in (["--thread", "other"], []):
        done = cli(example, "run", "support_chat", *extra, "--input", "message=What is my name?")
        assert done.out == "reply: I'm sorry, I don't know your name yet.\n", done.err


def test_the_example_flow_tests_pass(example: Path, cli: Cli) -> None:
    done = cli(example, "test", str(example / "flows" / "support_chat.test.yaml"))
    assert done.code == 0, done.out + done.err
    assert "3 passed, 0 failed" in done.out


def test_the_python_api_creates_and_deletes_threads(example: Path) -> None:
    with Yard.load(example) as yard:
        made = yard.create_thread("T", flow="support_chat")
        assert (made.id, made.flow, made.turns) == ("T", "support_chat", 0)
        with pytest.raises(UsageError, match="already exists"):
            yard.create_thread("T")
        with pytest.raises(UsageError, match="no_such_flow"):
            yard.create_thread("U", flow="no_such_flow")
        for message in ("My name is Ada", "What is my name?"):
            result = yard.run("support_chat", {"message": message}, thread="T")
        assert result.outputs == {"reply": "Your name is Ada."}
        assert [m.content for m in yard.history("T")][-1] == "Your name is Ada."
        assert yard.delete_thread("T") is True
        assert yard.thread("T") is None and yard.history("T") == []
        assert yard.delete_thread("T") is False
        # the id is free again, and the new thread remembers nothing of the old one
        yard.create_thread("T")
        again = yard.run("support_chat", {"message": "What is my name?"}, thread="T")
        assert again.outputs == {"reply": "I'm sorry, I don't know your name yet."}
