"""What `blockyard run` prints while a run goes: plain lines, the live table, JSON lines."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from engine.cli.progress import JsonLines, LiveTable, PlainLines, format_duration
from engine.core.events import Event, Sequencer


class Terminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def script() -> list[Event]:
    seq = Sequencer("r1")
    return [
        seq.make(
            "run_started", data={"flow": "hello", "version": 1, "note": "using the mock model"}
        ),
        seq.make("step_started", "greet"),
        seq.make("step_finished", "greet", {"duration_ms": 12.0}),
        seq.make("step_started", "shout"),
        seq.make("warning", "shout", {"message": "loop exhausted"}),
        seq.make("step_failed", "shout", {"duration_ms": 1500.0, "error": "boom"}),
        seq.make("run_failed", "shout", {"status": "failed", "error": "boom"}),
    ]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0123, "12 ms"), (1.234, "1.23 s"), (123.4, "2m 03s"), (None, "")]
)
def test_durations(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def test_plain_lines_for_logs() -> None:
    err = io.StringIO()
    display = PlainLines(err)
    for event in script():
        display.event(event)
    assert err.getvalue().splitlines() == [
        "note: using the mock model",
        "run r1: hello@1 started",
        "  greet: started",
        "  greet: finished in 12 ms",
        "  shout: started",
        "  warning (shout): loop exhausted",
        "  shout: failed after 1.50 s: boom",
    ]


def test_json_lines_one_event_per_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    display = JsonLines(out, err)
    for event in script():
        display.event(event)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["type"] for line in lines][-1] == "run_failed"
    assert [line["seq"] for line in lines] == list(range(1, 8))
    assert err.getvalue() == "note: using the mock model\n"  # the note goes to stderr, once


def test_live_table_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    term = Terminal()

    async def main() -> None:
        display = LiveTable(term)
        await display.start()
        for event in script():
            display.event(event)
        await display.stop()

    asyncio.run(main())
    text = term.getvalue()
    assert "\033[3" not in text  # no colour codes
    final = text.rsplit("\033[J", 1)[-1]  # what is on screen after the last redraw
    assert "✓ greet  12 ms" in text
    assert "✗ shout  1.50 s  boom" in final
    assert "⚠ loop exhausted" in text


def test_live_table_colours_and_repeated_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    term = Terminal()
    seq = Sequencer("r2")
    display = LiveTable(term)
    display.event(seq.make("run_started", data={"flow": "f", "version": 1}))
    for index in range(3):  # map items of one step overlap
        display.event(seq.make("step_started", "item", {"index": index}))
    for index in range(3):
        display.event(seq.make("step_finished", "item", {"index": index, "duration_ms": 10.0}))
    asyncio.run(display.stop())
    text = term.getvalue()
    assert "\033[32m✓\033[0m" in text
    assert "item ×3" in text
