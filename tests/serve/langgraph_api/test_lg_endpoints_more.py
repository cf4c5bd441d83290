"""POST /runs/batch, POST /runs/cancel, POST /threads/prune, GET /threads/{id}/stream and /info, driven by the
real langgraph-sdk client against `blockyard serve` on 127.0.0.1 (docs/langgraph-api.md)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.serve.serve_helpers import Live, wait_for
from tests.support.loopback import LOOPBACK


def lg(live: Live) -> Any:  # the SDK's TypedDict answers are looser than what the tests read
    return get_sync_client(url=live.url + "/lg")


def status_of(live: Live, run_id: str) -> str:
    """The run's status on Blockyard's own API (a run without a thread has no LangGraph path to read it at)."""
    found: str = httpx.get(f"{live.url}/runs/{run_id}", verify=LOOPBACK).json()["status"]
    return found


def refused(call: Any, status: int, match: str) -> None:
    with pytest.raises(httpx.HTTPStatusError, match=match) as caught:
        call()
    assert caught.value.response.status_code == status


def test_info_flags_tell_what_is_served(live: Live) -> None:
    client = lg(live)
    flags = client.http.get("/info")["flags"]
    assert flags == {
        "assistants": True,
        "crons": True,
        "langsmith": False,
        "langsmith_tracing_replicas": False,
    }
    assert client.assistants.search(limit=1)  # assistants: served
    assert isinstance(
        client.crons.search(), list
    )  # crons: served (tests/serve/langgraph_api/test_crons.py)


def test_batch_starts_runs_without_a_thread(live: Live) -> None:
    client = lg(live)
    made = client.runs.create_batch(
        [
            {"assistant_id": "hello", "input": {"name": "Ada"}},
            {"assistant_id": "count", "input": {}},
        ]
    )
    assert [run["assistant_id"] for run in made] == ["hello", "count"]
    assert all(
        run["thread_id"] is None and run["status"] in ("pending", "running", "success")
        for run in made
    )
    assert len({run["run_id"] for run in made}) == 2
    for run_id in [run["run_id"] for run in made]:
        wait_for(lambda: status_of(live, run_id) == "finished")  # noqa: B023 - called before the loop goes on
    # judged whole before any run starts: an unknown flow in it is a 404, an empty batch a 422
    before = len(httpx.get(f"{live.url}/runs?limit=1000", verify=LOOPBACK).json()["runs"])
    refused(
        lambda: client.runs.create_batch(
            [{"assistant_id": "hello", "input": {"name": "Bo"}}, {"assistant_id": "nope"}]
        ),
        404,
        "unknown flow 'nope'",
    )
    refused(lambda: client.runs.create_batch([]), 422, "must list the runs")
    assert len(httpx.get(f"{live.url}/runs?limit=1000", verify=LOOPBACK).json()["runs"]) == before


def test_cancel_many_by_id_and_by_status(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, "sleepy", input={})["run_id"]
    second = client.runs.create(thread, "sleepy", input={}, multitask_strategy="enqueue")["run_id"]
    client.runs.cancel_many(thread_id=thread, run_ids=[first, second])
    for run_id in (first, second):
        wait_for(lambda: client.runs.get(thread, run_id)["status"] == "interrupted")  # noqa: B023 - called at once
    other = client.threads.create()["thread_id"]
    running = client.runs.create(other, "sleepy", input={})["run_id"]
    wait_for(lambda: client.runs.get(other, running)["status"] == "running")
    client.runs.cancel_many(status="running")
    wait_for(lambda: client.runs.get(other, running)["status"] == "interrupted")
    refused(lambda: client.runs.cancel_many(), 422, "name the runs to cancel")
    # rollback: stopped, then deleted with its trace; the thread forgets the turn
    rolled = client.threads.create()["thread_id"]
    doomed = client.runs.create(rolled, "sleepy", input={})["run_id"]
    wait_for(lambda: client.runs.get(rolled, doomed)["status"] == "running")
    client.runs.cancel_many(thread_id=rolled, run_ids=[doomed], action="rollback")
    refused(lambda: client.runs.get(rolled, doomed), 404, f"has no run '{doomed}'")
    assert client.runs.list(rolled) == []
    refused(
        lambda: client.runs.cancel_many(status="all", action="shred"),
        422,
        "unknown action 'shred': use interrupt or rollback",
    )
    refused(
        lambda: client.runs.cancel_many(thread_id=thread, run_ids=["nope"]),
        404,
        "has no run 'nope'",
    )


def test_prune_deletes_threads_and_refuses_keep_latest(live: Live) -> None:
    client = lg(live)
    pruned = [client.threads.create()["thread_id"] for _ in range(2)]
    for thread in pruned:
        client.runs.wait(thread, "hello", input={"name": "Ada"})
    assert client.threads.prune([*pruned, "no-such-thread"]) == {"pruned_count": 2}
    for thread in pruned:
        refused(lambda thread=thread: client.threads.get(thread), 404, "unknown thread")
    kept = client.threads.create()["thread_id"]
    refused(
        lambda: client.threads.prune([kept], strategy="keep_latest"),
        422,
        "keep_latest' is not supported",
    )
    busy = client.threads.create()["thread_id"]
    run = client.runs.create(busy, "sleepy", input={})["run_id"]
    refused(lambda: client.threads.prune([kept, busy]), 409, "nothing was pruned")
    # judged whole: the idle one is still there
    assert client.threads.get(kept)["thread_id"] == kept
    client.runs.cancel(busy, run, wait=True)


def _listen(
    client: Any, thread: str, parts: queue.Queue[Any], runs: int, **kwargs: Any
) -> threading.Thread:
    """Read the thread's stream in a thread until `runs` runs ended (their last `values` part), then leave."""

    def read() -> None:
        ended = 0
        try:
            for part in client.threads.join_stream(thread, **kwargs):
                parts.put(part)
                if part.event == "values" and "total" in part.data:  # a run's end
                    ended += 1
                    if ended == runs:
                        return
        except Exception as exc:  # handed to the test, which fails with it
            parts.put(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def _drain(parts: queue.Queue[Any], reader: threading.Thread) -> list[Any]:
    reader.join(timeout=30)
    assert not reader.is_alive()
    found = []
    while not parts.empty():
        found.append(parts.get())
    assert not any(isinstance(part, Exception) for part in found), found
    return found


def test_thread_stream_follows_the_runs_of_the_thread(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    parts: queue.Queue[Any] = queue.Queue()
    reader = _listen(client, thread, parts, runs=2)
    time.sleep(0.5)  # the stream is open: what it sends are the runs that start from now on
    slow = client.runs.create(thread, "slow", input={"a": 1}, stream_mode=["values", "updates"])[
        "run_id"
    ]
    client.runs.join(thread, slow)
    then = client.runs.create(thread, "slow", input={"a": 2})["run_id"]  # values, the default
    seen = _drain(parts, reader)
    metadata = [part.data["run_id"] for part in seen if part.event == "metadata"]
    assert metadata == [slow, then]
    assert [
        part.data["total"] for part in seen if part.event == "values" and "total" in part.data
    ] == [11, 12]
    second = [index for index, part in enumerate(seen) if part.event == "metadata"][1]
    assert {part.event for part in seen[:second]} == {
        "metadata",
        "values",
        "updates",
    }  # each run in its own modes
    assert {part.event for part in seen[second:]} == {"metadata", "values"}
    ids = [part.id for part in seen if part.event != "metadata"]
    assert all(part_id.startswith((f"{slow}:", f"{then}:")) for part_id in ids)
    # a client that reconnects gets the rest of that run, then the runs after it
    cut = next(index for index, part in enumerate(seen) if part.event == "updates")
    again: queue.Queue[Any] = queue.Queue()
    rest = _drain(again, _listen(client, thread, again, runs=2, last_event_id=seen[cut].id))
    assert [(p.event, p.data, p.id) for p in rest] == [
        (p.event, p.data, p.id) for p in seen[cut + 1 :]
    ]


def test_thread_stream_refusals(live: Live) -> None:
    client = lg(live)
    thread = client.threads.create()["thread_id"]
    refused(
        lambda: next(iter(client.threads.join_stream(thread, stream_mode="lifecycle"))),
        422,
        "'lifecycle' is not supported",
    )
    refused(lambda: next(iter(client.threads.join_stream("no-such-thread"))), 404, "unknown thread")
    refused(
        lambda: next(iter(client.threads.join_stream(thread, last_event_id="7.0"))),
        400,
        "Last-Event-ID must be an id",
    )
