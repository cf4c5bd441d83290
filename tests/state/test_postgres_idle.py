"""A Blockyard session left idle inside a transaction is ended by the Postgres server: a replica
frozen mid-transaction (SIGSTOP, a paused VM) must not hold its row locks — and with them another
replica's takeover of its runs — for as long as it stays frozen (engine/state/postgres.py,
IDLE_IN_TRANSACTION; docs/postgres.md, "How a takeover happens")."""

from __future__ import annotations

import time

import pytest

from engine.state import postgres
from engine.state.database import BackendError, StateError


def test_a_session_frozen_inside_a_transaction_lets_go_of_its_locks(pg_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION", 0.5)
    frozen, other = postgres.connect(pg_url), postgres.connect(pg_url)
    try:
        other.execute("CREATE TABLE held (id INTEGER PRIMARY KEY, n INTEGER)")
        other.execute("INSERT INTO held (id, n) VALUES (1, 0)")
        frozen.execute("BEGIN")
        frozen.execute("UPDATE held SET n = 1 WHERE id = 1")  # then nothing more: as a process stopped here
        began = time.monotonic()
        other.execute("UPDATE held SET n = 2 WHERE id = 1")  # waits for the lock only until the server steps in
        assert time.monotonic() - began < 5
        assert other.execute("SELECT n FROM held WHERE id = 1").fetchone() == (2,)  # the frozen update rolled back
        with pytest.raises((StateError, BackendError)):  # woken up, the frozen session finds itself ended
            frozen.execute("SELECT 1")
    finally:
        frozen.close()
        other.close()
