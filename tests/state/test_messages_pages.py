"""A conversation thread's messages as `blockyard threads show` and the HTTP API read them (engine/state/
messages.py): pages from the first message or back from the newest, a turn's own two messages, the count,
and a deleted thread's messages gone — on a real state database (SQLite, or Postgres in that pass)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.state import messages
from engine.state.checkpointer import StateDB
from engine.state.location import locate

THREAD, OTHER = "thread-1", "thread-2"
NOW = "2026-01-01T00:00:00.000Z"
TURNS = 30  # 60 messages: more than a default page (50)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[StateDB]:
    state = StateDB(locate(tmp_path / "state.db"))
    try:
        state.writer.write_sync(
            *(
                messages.append_turn(THREAD, f"run-{n}", f"said {n}", f"reply {n}", NOW)
                for n in range(TURNS)
            )
        )
        state.writer.write_sync(messages.append_turn(OTHER, "run-other", "elsewhere", "there", NOW))
        yield state
    finally:
        state.close()


def indexes(page: list[messages.Message]) -> list[int]:
    return [message.index for message in page]


def test_a_page_starts_at_the_first_message_in_order(db: StateDB) -> None:
    page = db.read(lambda conn: messages.history(conn, THREAD))
    assert indexes(page) == list(range(messages.PAGE)) and messages.PAGE == 50
    first, second = page[0], page[1]
    assert first == messages.Message(THREAD, 0, "user", "said 0", "run-0", NOW)
    assert second == messages.Message(THREAD, 1, "assistant", "reply 0", "run-0", NOW)
    assert page[-1].content == "reply 24"


def test_a_page_after_an_index_and_of_a_given_size(db: StateDB) -> None:
    page = db.read(lambda conn: messages.history(conn, THREAD, after=3, limit=4))
    assert [(m.index, m.content) for m in page] == [
        (4, "said 2"),
        (5, "reply 2"),
        (6, "said 3"),
        (7, "reply 3"),
    ]
    assert db.read(lambda conn: messages.history(conn, THREAD, after=59)) == []
    assert indexes(db.read(lambda conn: messages.history(conn, THREAD, after=-1, limit=2))) == [
        0,
        1,
    ]


def test_the_newest_page_opens_at_the_end_and_pages_back(db: StateDB) -> None:
    newest = db.read(lambda conn: messages.history(conn, THREAD, limit=3, newest=True))
    assert [(m.index, m.content) for m in newest] == [
        (57, "reply 28"),
        (58, "said 29"),
        (59, "reply 29"),
    ]
    before = db.read(lambda conn: messages.history(conn, THREAD, after=57, limit=3, newest=True))
    assert indexes(before) == [54, 55, 56]  # the page before the one above, still in order
    assert indexes(
        db.read(lambda conn: messages.history(conn, THREAD, after=2, limit=10, newest=True))
    ) == [0, 1]
    assert len(db.read(lambda conn: messages.history(conn, THREAD, newest=True))) == messages.PAGE


def test_a_page_holds_at_least_one_and_at_most_a_thousand(db: StateDB) -> None:
    assert indexes(db.read(lambda conn: messages.history(conn, THREAD, limit=0))) == [0]
    assert indexes(db.read(lambda conn: messages.history(conn, THREAD, limit=-5, newest=True))) == [
        59
    ]
    db.writer.write_sync(
        *(messages.append_turn(THREAD, f"more-{n}", "m", "r", NOW) for n in range(500))
    )
    assert messages.MAX_PAGE == 1000
    assert len(db.read(lambda conn: messages.history(conn, THREAD, limit=5000))) == 1000
    assert (
        indexes(db.read(lambda conn: messages.history(conn, THREAD, limit=5000, newest=True)))[0]
        == 1060 - 1000
    )


def test_threads_do_not_mix(db: StateDB) -> None:
    assert [
        (m.thread_id, m.content) for m in db.read(lambda conn: messages.history(conn, OTHER))
    ] == [(OTHER, "elsewhere"), (OTHER, "there")]
    assert db.read(lambda conn: messages.count(conn, THREAD)) == 2 * TURNS
    assert db.read(lambda conn: messages.count(conn, OTHER)) == 2
    assert db.read(lambda conn: messages.count(conn, "nobody")) == 0


def test_a_turn_has_its_message_then_its_reply(db: StateDB) -> None:
    turn = db.read(lambda conn: messages.of_run(conn, "run-7"))
    assert [(m.index, m.role, m.content, m.run_id) for m in turn] == [
        (14, "user", "said 7", "run-7"),
        (15, "assistant", "reply 7", "run-7"),
    ]
    assert db.read(lambda conn: messages.of_run(conn, "run-that-failed")) == []


def test_deleting_a_thread_removes_its_messages_only(db: StateDB) -> None:
    db.writer.write_sync(messages.delete_thread(THREAD))
    assert db.read(lambda conn: messages.count(conn, THREAD)) == 0
    assert db.read(lambda conn: messages.of_run(conn, "run-0")) == []
    assert db.read(lambda conn: messages.count(conn, OTHER)) == 2


def test_a_message_as_the_api_shows_it(db: StateDB) -> None:
    message = db.read(lambda conn: messages.history(conn, OTHER))[1]
    assert message.as_dict() == {
        "thread_id": OTHER,
        "index": 1,
        "role": "assistant",
        "content": "there",
        "run_id": "run-other",
        "created": NOW,
    }
