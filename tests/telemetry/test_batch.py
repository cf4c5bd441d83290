"""The spans waiting to be sent and the thread that sends them (engine/telemetry/batch.py), with real threads
and real time: a full batch leaves at once, a partial one after the delay, a flush and a stop send what
waits, a full queue drops (said once), a failing send is said and the thread goes on. And the ids and times
spans get (engine/telemetry/spans.py): ids never zero, never repeated, a forked child's its own."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from engine.telemetry.batch import Batch
from engine.telemetry.settings import Batching
from engine.telemetry.spans import new_span_id, new_trace_id, time_ns

REPO = Path(__file__).resolve().parents[2]
LONG = 60.0  # a delay no test waits for: what leaves before it left for another reason


class Sent:
    """A batch's `send`: keeps each body's spans; `hold` keeps it inside its call until released."""

    def __init__(self) -> None:
        self.bodies: list[list[bytes]] = []
        self.arrived = threading.Event()
        self.inside = threading.Event()
        self.hold = threading.Event()
        self.hold.set()

    def __call__(self, spans: list[bytes]) -> None:
        self.inside.set()
        self.hold.wait(30)
        self.bodies.append(list(spans))
        self.arrived.set()

    def spans(self) -> list[bytes]:
        return [span for body in self.bodies for span in body]


def test_a_full_batch_leaves_at_once_and_the_rest_waits() -> None:
    sent, said = Sent(), list[str]()
    batch = Batch(sent, Batching(delay=LONG, max_batch=3, max_queue=100), said.append)
    try:
        for number in range(3):
            batch.add(b"span %d" % number)
        assert sent.arrived.wait(20)  # long before the delay: the batch was full
        assert sent.bodies == [[b"span 0", b"span 1", b"span 2"]]
        batch.add(b"span 3")
        time.sleep(0.3)
        assert len(sent.bodies) == 1  # one span: it waits for the delay (or a flush)
        assert batch.flush(20)
        assert sent.spans()[-1] == b"span 3"
    finally:
        batch.stop(20)
    assert said == []


def test_a_partial_batch_leaves_after_the_delay() -> None:
    sent = Sent()
    batch = Batch(sent, Batching(delay=0.2, max_batch=512, max_queue=2048), print)
    try:
        batch.add(b"alone")
        assert sent.arrived.wait(20)
        assert sent.bodies == [[b"alone"]]
    finally:
        batch.stop(20)


def test_stop_sends_what_waits_and_later_spans_are_dropped() -> None:
    sent = Sent()
    batch = Batch(sent, Batching(delay=LONG, max_batch=512, max_queue=2048), print)
    for number in range(5):
        batch.add(b"%d" % number)
    batch.stop(20)
    assert not batch.thread.is_alive()
    assert sent.spans() == [b"0", b"1", b"2", b"3", b"4"]
    batch.add(b"late")  # after the end: dropped, never an error
    assert b"late" not in sent.spans()
    assert batch.flush(1)  # nothing to wait for: the thread is gone


def test_a_full_queue_drops_new_spans_and_says_so_once() -> None:
    sent, said = Sent(), list[str]()
    batch = Batch(sent, Batching(delay=LONG, max_batch=2, max_queue=2), said.append)
    try:
        sent.hold.clear()
        batch.add(b"a")
        batch.add(b"b")  # a full batch: the sender takes both, and is held inside its send
        assert sent.inside.wait(20)
        for name in (b"c", b"d", b"e", b"f"):  # two fit in the queue meanwhile; two are dropped
            batch.add(name)
        sent.hold.set()
        assert batch.flush(20)
    finally:
        batch.stop(20)
    assert sent.spans() == [b"a", b"b", b"c", b"d"]
    assert len(said) == 1 and said[0].startswith("2 span(s) were dropped: more than 2 waited"), said
    assert "OTEL_BSP_MAX_QUEUE_SIZE" in said[0]


def test_a_send_that_fails_is_said_and_the_thread_goes_on() -> None:
    said: list[str] = []
    sent: list[bytes] = []

    def send(spans: list[bytes]) -> None:
        if spans == [b"bad"]:
            raise ValueError("cannot encode")
        sent.extend(spans)

    batch = Batch(send, Batching(delay=LONG, max_batch=512, max_queue=2048), said.append)
    try:
        batch.add(b"bad")
        assert batch.flush(20)
        batch.add(b"good")
        assert batch.flush(20)
    finally:
        batch.stop(20)
    assert sent == [b"good"]
    assert said == ["1 span(s) could not be sent (ValueError: cannot encode)"]


def test_ids_are_never_zero_and_never_repeat() -> None:
    spans = {new_span_id() for _ in range(10_000)}
    traces = {new_trace_id() for _ in range(10_000)}
    assert len(spans) == len(traces) == 10_000
    assert {len(each) for each in spans} == {8} and {len(each) for each in traces} == {16}
    assert bytes(8) not in spans and bytes(16) not in traces


def test_a_forked_child_makes_ids_of_its_own() -> None:
    """A server that forks workers after tracing started: the child's generator is reseeded, so parent and
    child never hand out the same ids (as they would from one copied state). random.seed() in the
    program does not touch them either."""
    code = (
        "import os, random\n"
        "from engine.telemetry.spans import new_span_id\n"
        "new_span_id()\n"
        "read, write = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.write(write, b''.join(new_span_id() for _ in range(4)))\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "child = os.read(read, 64)\n"
        "random.seed(1)\n"
        "first = b''.join(new_span_id() for _ in range(4))\n"
        "random.seed(1)\n"
        "again = b''.join(new_span_id() for _ in range(4))\n"
        "print(child.hex(), first.hex(), again.hex())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    child, parent, seeded = done.stdout.split()
    assert len(child) == len(parent) == 64
    assert child != parent
    assert seeded != parent  # the program's random.seed() is not ours


def test_event_times_read_as_nanoseconds_since_the_epoch() -> None:
    """An event's time (ISO-8601 UTC with milliseconds, engine/core/events.py) as a span's start or end."""
    for text in (
        "2026-11-28T07:15:28.123Z",
        "1999-12-31T23:59:59.999Z",
        "2028-02-29T00:00:00.000Z",
    ):
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        whole = int((moment - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
        assert time_ns(text) == whole * 1_000_000_000 + int(text[20:23]) * 1_000_000
        # again: from what it kept
        assert time_ns(text) == whole * 1_000_000_000 + int(text[20:23]) * 1_000_000
