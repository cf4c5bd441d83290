"""Following a run's events (engine/serve/follow.py on engine/serve/broker.py): the stored trace
and the broker's backlog of the execution, merged by seq — the backlog alone has the tokens,
which are never stored. A client that starts a run and follows it a moment later (on a busy
server the run may be over by then) must still get every token, in its place."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from engine.core.events import EventDict
from engine.serve import broker as broker_module
from engine.serve.broker import Broker
from engine.serve.follow import follow


def event(seq: int, kind: str, **data: Any) -> EventDict:
    return {"run_id": "r", "seq": seq, "type": kind, "step": "s", "data": data, "time": "t"}


RUN = [
    event(1, "run_started"),
    event(2, "step_started"),
    event(3, "token", text="Hello"),
    event(4, "token", text=" Ada"),
    event(5, "step_finished"),
    event(6, "run_finished"),
]
STORED = [e for e in RUN if e["type"] != "token"]


class Trace:
    """The trace table after the execution: every event but the tokens."""

    async def events(self, run_id: str, after: int) -> list[EventDict]:
        return [e for e in STORED if e["seq"] > after]

    async def status(self, run_id: str) -> str | None:
        return "finished"


def executed(broker: Broker) -> None:
    broker.open("r")
    for item in RUN:
        broker.publish(item)
    broker.close("r")


async def followed(broker: Broker, after: int = 0) -> list[EventDict]:
    return [e async for e in follow("r", after, broker, Trace(), until_pause=True, poll=0.01)]


def test_a_run_followed_after_it_ended_still_gives_its_tokens_in_place() -> None:
    broker = Broker()
    executed(broker)
    assert asyncio.run(followed(broker)) == RUN
    # a reconnection after the first token gets the rest, in order
    assert [e["seq"] for e in asyncio.run(followed(broker, after=3))] == [4, 5, 6]


def test_the_ended_execution_is_forgotten_after_a_while(monkeypatch: Any) -> None:
    broker = Broker()
    executed(broker)
    monkeypatch.setattr(broker_module, "RETAIN_SECONDS", 0.0)
    assert asyncio.run(followed(broker)) == STORED  # the trace, as stored: tokens are live only
    assert broker.active_runs() == []


def test_only_the_last_runs_are_kept(monkeypatch: Any) -> None:
    monkeypatch.setattr(broker_module, "RETAIN_RUNS", 2)
    broker = Broker()
    for run_id in ("a", "b", "c"):
        broker.open(run_id)
        broker.publish({**RUN[2], "run_id": run_id})
        broker.close(run_id)
    assert [broker.subscribe(run_id).backlog != [] for run_id in ("b", "c")] == [True, True]
    assert broker.subscribe("a").backlog == []


def test_a_new_execution_starts_with_an_empty_backlog() -> None:
    broker = Broker()
    executed(broker)
    broker.open("r")  # resumed
    assert broker.subscribe("r").backlog == []


class SlowTrace(Trace):
    """A trace read that takes a while (a Postgres round trip on a busy server): meanwhile the execution
    goes on, publishing its tokens and committing the step that follows them."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def events(self, run_id: str, after: int) -> list[EventDict]:
        if after == 0:
            for item in RUN[2:]:  # published while the read is on its way...
                self.broker.publish(item)
            self.broker.close("r")
            return [e for e in STORED if e["seq"] > after]  # ...and stored by the time it answers
        return await super().events(run_id, after)


def test_tokens_published_while_the_trace_is_read_are_not_skipped() -> None:
    broker = Broker()
    broker.open("r")
    broker.publish(RUN[0])
    broker.publish(RUN[1])
    found = asyncio.run(_follow_slow(broker))
    assert found == RUN


async def _follow_slow(broker: Broker) -> list[EventDict]:
    return [e async for e in follow("r", 0, broker, SlowTrace(broker), until_pause=True, poll=0.01)]


class AheadTrace(Trace):
    """The table ahead of the broker, as on a busy server: the execution stores its events on the run
    loop's thread, and the server's loop publishes them (tokens between) a moment later."""

    def __init__(self, stored: list[EventDict]) -> None:
        self.stored = stored

    async def events(self, run_id: str, after: int) -> list[EventDict]:
        return [e for e in self.stored if e["seq"] > after]

    async def status(self, run_id: str) -> str | None:
        return "running"


def busy(monkeypatch: pytest.MonkeyPatch, *meanwhile: Callable[[], None]) -> None:
    """The follower's polls on a busy server: the first ones time out, and as each does, what the server
    did meanwhile happens; later polls are asyncio's own."""
    real = asyncio.wait_for
    steps = list(meanwhile)

    async def wait_for(waited: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        if not steps:
            return await real(waited, timeout)
        waited.close()
        steps.pop(0)()
        raise TimeoutError

    monkeypatch.setattr(asyncio, "wait_for", wait_for)


def started(broker: Broker) -> None:
    broker.open("r")
    broker.publish(RUN[0])
    broker.publish(RUN[1])


def ended(broker: Broker) -> None:
    for rest in RUN[2:]:
        broker.publish(rest)
    broker.close("r")


def test_a_run_executing_here_is_followed_on_the_broker_not_by_polling_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = Broker()
    started(broker)
    trace = AheadTrace(STORED[:2])

    def stored() -> None:  # the execution stored the rest; the broker publishes it a moment later
        trace.stored = STORED
        asyncio.get_running_loop().call_soon(ended, broker)

    busy(monkeypatch, stored)
    found = asyncio.run(_follow(broker, trace))
    assert found == RUN


def test_a_poll_that_times_out_as_the_execution_ends_takes_the_queue_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = Broker()
    started(broker)
    # the execution ended while the poll timed out: its events, tokens and all, wait on the queue
    busy(monkeypatch, lambda: ended(broker))
    assert asyncio.run(_follow(broker, AheadTrace(STORED))) == RUN


async def _follow(broker: Broker, trace: Trace) -> list[EventDict]:
    return [e async for e in follow("r", 0, broker, trace, until_pause=True, poll=0.01)]


def test_stored_events_ahead_of_the_broker_do_not_skip_its_tokens() -> None:
    async def main() -> list[EventDict]:
        broker = Broker()
        started(broker)
        found: list[EventDict] = []
        async for item in follow("r", 0, broker, AheadTrace(STORED), until_pause=True, poll=0.01):
            found.append(item)
            if item["seq"] == 2:  # the rest reaches the broker after the follower read the table
                ended(broker)
        return found

    assert asyncio.run(main()) == RUN
