"""`blockyard db status` and `blockyard db copy --to URL`: a yard's SQLite state moves to Postgres
whole — runs and their traces, checkpoints, a conversation thread, memory, and a run paused at an
approval, which then resumes on Postgres — and no output shows the URL's password."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.state import migrations
from engine.state.location import URL_ENV
from engine.state.memory import open_store
from engine.state.transfer import TABLES
from tests.runtime.conftest import BLOCKS as RUNTIME_BLOCKS
from tests.runtime.conftest import CONFIG as RUNTIME_CONFIG
from tests.support.cli import Cli
from tests.support.postgres import PASSWORD

FILES = {
    "blocks/answer.yaml": """
        block: answer
        kind: transform
        inputs: {message: {type: string}}
        outputs: {reply: {type: string}}
        compute: {reply: "'you said: ' ~ message"}
    """,
    "flows/chat.yaml": """
        flow: chat
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: answer, uses: answer}
    """,
    "flows/careful.yaml": """
        flow: careful
        inputs: {message: {type: string}}
        outputs: [reply]
        steps:
          - {id: ok, approval: {message: "Answer {{ inputs.message }}?"}}
          - {id: answer, uses: answer}
    """,
    "flows/lit.yaml": """
        flow: lit
        inputs: {message: {type: string}}
        outputs: [reply, echo]
        steps:
          - {id: answer, uses: answer}
          - {id: boom, uses: explode, with: {text: "{{ context.reply }}"}}
    """,
    "blocks/explode.yaml": RUNTIME_BLOCKS["blocks/explode.yaml"],  # fails until `fixed.flag` exists
    **RUNTIME_CONFIG,
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


def _status(cli: Cli, yard: Path) -> dict[str, object]:
    outcome = cli(yard, "db", "status", "--json")
    assert outcome.code == 0, outcome.err
    body: dict[str, object] = json.loads(outcome.out)
    return body


def test_db_status_of_a_sqlite_yard(yard: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)  # this test is about the SQLite file, in either pass
    assert _status(cli, yard) == {
        "backend": "sqlite",
        "location": str(yard / ".blockyard" / "state.db"),
        "schema_version": 0,
        "counts": {"runs": 0, "threads": 0, "messages": 0, "gates": 0, "memory": 0},
    }
    assert cli(yard, "run", "chat", "--input", "message=hi").code == 0
    body = _status(cli, yard)
    assert body["schema_version"] == migrations.SCHEMA_VERSION
    assert body["counts"] == {"runs": 1, "threads": 0, "messages": 0, "gates": 0, "memory": 0}
    text = cli(yard, "db", "status").out
    assert "backend         sqlite\n" in text and "runs            1\n" in text


def test_copy_moves_everything_and_a_paused_run_resumes_on_postgres(
    yard: Path, cli: Cli, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)  # the source is the yard's SQLite file
    assert cli(yard, "run", "chat", "--thread", "t1", "--input", "message=hello").code == 0
    assert cli(yard, "run", "careful", "--run-id", "paused", "--input", "message=later").code == 3
    assert cli(yard, "memory", "set", "users/ada", "color", "blue").code == 0
    # failed at `boom`, inside the node `answer` finished in (engine/state/journal.py)
    assert cli(yard, "run", "lit", "--run-id", "lit", "--input", "message=hi").code == 1

    copied = cli(yard, "db", "copy", "--to", pg_url)
    assert copied.code == 0, copied.err
    assert PASSWORD not in copied.out + copied.err and "blockyard:***@" in copied.out
    assert "3 runs" in copied.out and "1 memory" in copied.out

    monkeypatch.setenv(URL_ENV, pg_url)  # from now on the yard runs on Postgres
    body = _status(cli, yard)
    assert body["backend"] == "postgres" and PASSWORD not in json.dumps(body)
    assert body["schema_version"] == migrations.SCHEMA_VERSION
    assert body["counts"] == {"runs": 3, "threads": 1, "messages": 2, "gates": 1, "memory": 1}

    assert "paused" in cli(yard, "runs").out
    resumed = cli(yard, "resume", "paused", "--approve", "--json")
    assert resumed.code == 0, resumed.err
    assert resumed.events()[-1]["type"] == "run_finished"
    assert resumed.events()[-1]["data"]["outputs"] == {"reply": "you said: later"}
    # the trace copied from SQLite goes on where it stopped: one sequence, no gaps
    shown = json.loads(cli(yard, "runs", "show", "paused", "--json").out)
    seqs = [event["seq"] for event in shown["events"]]
    assert seqs == list(range(1, len(seqs) + 1))

    (yard / "fixed.flag").write_text("")
    lit = cli(yard, "resume", "lit", "--json")
    assert lit.code == 0, lit.err
    assert [e["step"] for e in lit.events() if e["type"] == "step_started"] == [
        "boom"
    ]  # `answer` was kept
    assert lit.events()[-1]["data"]["outputs"] == {"reply": "you said: hi", "echo": "you said: hi!"}

    assert cli(yard, "run", "chat", "--thread", "t1", "--input", "message=again").code == 0
    thread = json.loads(cli(yard, "threads", "show", "t1", "--json").out)
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [
        ("user", "hello"),
        ("assistant", "you said: hello"),
        ("user", "again"),
        ("assistant", "you said: again"),
    ]
    got = cli(yard, "memory", "get", "users/ada", "color")
    assert (got.code, got.out.strip()) == (0, '"blue"')


def test_copy_refuses_a_target_that_holds_runs(
    yard: Path, cli: Cli, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert cli(yard, "run", "chat", "--input", "message=hi").code == 0
    assert cli(yard, "db", "copy", "--to", pg_url).code == 0
    again = cli(yard, "db", "copy", "--to", pg_url)
    assert again.code == 2 and "already holds 1 run(s)" in again.err and PASSWORD not in again.err


def test_copy_needs_a_postgres_url(yard: Path, cli: Cli) -> None:
    outcome = cli(yard, "db", "copy", "--to", "mysql://root:hunter2hunter2@db/x")
    assert (
        outcome.code == 2
        and "is not a Postgres URL" in outcome.err
        and "hunter2hunter2" not in outcome.err
    )


def test_copy_keeps_the_key_order_of_memory_values_old_and_new(
    yard: Path, cli: Cli, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert (
        cli(yard, "memory", "set", "users/ada", "lunch", "{restaurant: Pho, dish: soup}").code == 0
    )
    with open_store(
        yard / ".blockyard" / "state.db"
    ) as store:  # as an earlier version wrote a preference
        store.put(("users", "ada", "preferences"), "old", {"value": {"zeta": 1, "alpha": 2}})
    assert cli(yard, "db", "copy", "--to", pg_url).code == 0
    monkeypatch.setenv(URL_ENV, pg_url)
    assert (
        cli(yard, "memory", "get", "users/ada", "lunch").out
        == '{"restaurant": "Pho", "dish": "soup"}\n'
    )
    assert cli(yard, "memory", "get", "users/ada", "old").out == '{"zeta": 1, "alpha": 2}\n'


def test_copy_names_every_column_of_the_tables_it_copies(tmp_path: Path) -> None:
    # a column a migration adds (a run's durability, trace, output folder) must move with `db copy`
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    try:
        migrations.migrate(conn, "2026-01-01T00:00:00Z")
        # a loop over no table would check nothing
        assert {"runs", "events", "messages"} <= set(TABLES)
        for table, columns in TABLES.items():
            found = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            assert set(columns) == found, (table, sorted(found - set(columns)))
    finally:
        conn.close()
