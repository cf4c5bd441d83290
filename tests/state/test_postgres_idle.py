"""A Blockyard session left idle inside a transaction is ended by the Postgres server: a replica
frozen mid-transaction (SIGSTOP, a paused VM) must not hold its row locks — and with them another
replica's takeover of its runs — for as long as it stays frozen (engine/state/postgres.py,
IDLE_IN_TRANSACTION; docs/postgres.md, "How a takeover happens")."""

from __future__ import annotations

import threading
import time

import pytest
from psycopg.adapt import Dumper

from engine.state import postgres
from engine.state.database import BackendError, StateError


def test_a_session_frozen_inside_a_transaction_lets_go_of_its_locks(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION", 0.5)
    frozen, other = postgres.connect(pg_url), postgres.connect(pg_url)
    try:
        other.execute("CREATE TABLE held (id INTEGER PRIMARY KEY, n INTEGER)")
        other.execute("INSERT INTO held (id, n) VALUES (1, 0)")
        frozen.execute("BEGIN")
        # then nothing more: as a process stopped here
        frozen.execute("UPDATE held SET n = 1 WHERE id = 1")
        began = time.monotonic()
        # waits for the lock only until the server steps in
        other.execute("UPDATE held SET n = 2 WHERE id = 1")
        assert time.monotonic() - began < 5
        # the frozen update rolled back
        assert other.execute("SELECT n FROM held WHERE id = 1").fetchone() == (2,)
        # woken up, the frozen session finds itself ended
        with pytest.raises((StateError, BackendError), match="idle-in-transaction timeout"):
            frozen.execute("SELECT 1")
    finally:
        frozen.close()
        other.close()


FREEZE = 5.0  # seconds the batch stays stopped: far longer than the (shortened) idle timeout


class Frozen:
    """A parameter whose conversion takes FREEZE seconds: the process stops in the middle of an executemany."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.stopped = threading.Event()


class FrozenDumper(Dumper):
    def dump(self, obj: Frozen) -> bytes:
        obj.stopped.set()
        time.sleep(FREEZE)
        return str(obj.value).encode()


def test_a_session_frozen_inside_an_executemany_lets_go_of_its_locks(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two rows of psycopg's pipelined executemany the server waits for the rest of the pipeline
    as an active session, which no idle timeout ends: the rows are sent as one message instead."""
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION", 0.5)
    frozen, other = postgres.connect(pg_url), postgres.connect(pg_url)
    frozen.raw.adapters.register_dumper(Frozen, FrozenDumper)
    failed: list[BaseException] = []
    stop = Frozen(2)

    def batch() -> None:
        try:
            with frozen.transaction():
                frozen.execute("UPDATE held SET n = 1 WHERE id = 1")
                frozen.executemany("UPDATE held SET n = n + 1 WHERE id = ?", [(1,), (stop,), (3,)])
        except (StateError, BackendError) as exc:  # woken up, it finds its session ended
            failed.append(exc)

    try:
        other.execute("CREATE TABLE held (id INTEGER PRIMARY KEY, n INTEGER)")
        other.executemany("INSERT INTO held (id, n) VALUES (?, 0)", [(1,), (2,), (3,)])
        worker = threading.Thread(target=batch)
        worker.start()
        assert stop.stopped.wait(timeout=30)  # stopped mid-batch; its transaction holds row 1
        began = time.monotonic()
        # waits for the lock only until the server steps in
        other.execute("UPDATE held SET n = 9 WHERE id = 1")
        waited = time.monotonic() - began
        worker.join(timeout=30)
        assert waited < FREEZE - 2, (
            f"the lock was held {waited:.1f} s, as long as the process stayed frozen"
        )
        assert other.execute("SELECT id, n FROM held ORDER BY id").fetchall() == [
            (1, 9),
            (2, 0),
            (3, 0),
        ]
        assert failed, "the frozen batch committed"
    finally:
        frozen.close()
        other.close()
