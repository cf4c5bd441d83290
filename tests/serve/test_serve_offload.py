"""Events crossing from the run loop to the server's loop (engine/serve/offload.py): all of them, in order,
in batches — one wake-up of the server's loop for what the run loop sent before it got to it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from engine.core.events import EventDict
from engine.serve.offload import RunLoop


def _event(run: str, seq: int) -> EventDict:
    return {"run_id": run, "seq": seq, "type": "token", "step": "s", "time": "", "data": {}}


def _burst(
    run: str, count: int, sent: threading.Event | None = None
) -> AsyncGenerator[EventDict, None]:
    async def events() -> AsyncGenerator[EventDict, None]:
        for seq in range(1, count + 1):  # no await between them: one burst on the run loop
            yield _event(run, seq)
        if sent is not None:
            sent.set()

    return events()


@pytest.fixture
def runs() -> Any:
    loop = RunLoop()
    yield loop
    loop.close()


def test_a_burst_of_events_crosses_in_a_few_wake_ups_all_of_them_in_order(runs: RunLoop) -> None:
    wake_ups = 0
    sent = threading.Event()

    async def follow() -> list[int]:
        home = asyncio.get_running_loop()
        original = home.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wake_ups
            wake_ups += 1
            return original(*args, **kwargs)

        home.call_soon_threadsafe = counting  # type: ignore[method-assign, assignment]
        seqs = []
        try:
            async for event in runs.stream(lambda: _burst("a", 200, sent)):
                if event["seq"] == 1:
                    # the server's loop kept busy (as under load) until the run loop has sent the rest:
                    # what it sent meanwhile must cross together, however the threads were scheduled
                    home.call_soon(sent.wait, 10)
                seqs.append(event["seq"])
        finally:
            del home.call_soon_threadsafe
        return seqs

    got = asyncio.run(follow())
    assert got == list(range(1, 201))
    # one at a time this was 201 (each event, then the end); here: the first event (which waits for
    # the second to be asked for), the other 199, and the end if it came after the server's loop woke
    assert 2 <= wake_ups <= 3, wake_ups


def test_streams_sharing_the_run_loop_each_get_their_own_events_in_order(runs: RunLoop) -> None:
    async def follow(run: str) -> list[int]:
        seqs = []
        async for event in runs.stream(lambda: _burst(run, 300)):
            assert event["run_id"] == run
            seqs.append(event["seq"])
        return seqs

    async def all_of_them() -> list[list[int]]:
        return await asyncio.gather(*(follow(f"run{i}") for i in range(8)))

    got = asyncio.run(all_of_them())
    assert all(seqs == list(range(1, 301)) for seqs in got)


def test_an_error_crosses_after_the_events_before_it(runs: RunLoop) -> None:
    async def failing() -> AsyncGenerator[EventDict, None]:
        for seq in (1, 2, 3):
            yield _event("f", seq)
        raise ValueError("boom")

    got: list[int] = []

    async def follow() -> None:
        async for event in runs.stream(failing):
            got.append(event["seq"])

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(follow())
    assert got == [1, 2, 3]
