"""Events say where a step runs: map items and foreach iterations carry `index` and `items`,
steps of a loop body `pass` and `max_iterations`; `blockyard run` shows them as
`summarize [item 3/10]` and `review [pass 2/15]`."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from engine.cli.progress import LiveTable, PlainLines
from engine.core.events import Event, Sequencer

FILES = {
    "blocks/double.yaml": """
        block: double
        kind: transform
        inputs: {x: {type: integer, default: 1}}
        outputs: {y: {type: integer}}
        compute: {y: "x * 2"}
    """,
    "flows/places.yaml": """
        flow: places
        steps:
          - id: again
            loop:
              max_iterations: 3
              steps:
                - {id: tick, uses: double}
          - id: each
            map: {items: "[1, 2, 3]", as: x, uses: double}
          - id: rows
            foreach:
              items: "[1, 2]"
              as: x
              steps:
                - {id: row, uses: double}
          - id: bodies
            map:
              items: "[5, 6]"
              as: x
              steps:
                - {id: inner, uses: double}
    """,
}


@pytest.fixture
def events(make_yard: Callable[[dict[str, str]], Path]) -> list[Event]:
    root = make_yard(FILES)

    async def main() -> list[Event]:
        async with Yard.load(root) as yard:
            return [e async for e in yard.astream("places")]

    return [e for e in asyncio.run(main()) if e.type in ("step_started", "step_finished")]


def where(events: list[Event], step: str, kind: str = "step_finished") -> list[dict[str, Any]]:
    keys = ("index", "items", "pass", "max_iterations")
    return sorted(
        (
            {k: e.data[k] for k in keys if k in e.data}
            for e in events
            if e.step == step and e.type == kind
        ),
        key=lambda d: (d.get("index", -1), d.get("pass", 0)),
    )


def test_loop_body_events_say_which_pass(events: list[Event]) -> None:
    assert where(events, "tick") == [{"pass": n, "max_iterations": 3} for n in (1, 2, 3)]
    assert where(events, "tick", "step_started") == [
        {"pass": n, "max_iterations": 3} for n in (1, 2, 3)
    ]
    assert where(events, "again") == [{}]  # the loop step itself runs once, outside its body


def test_item_events_say_which_item_of_how_many(events: list[Event]) -> None:
    assert where(events, "each") == [
        {"items": 3},
        *({"index": i, "items": 3} for i in range(3)),
    ]  # the map, items
    assert where(events, "row") == [{"index": i, "items": 2} for i in range(2)]
    assert where(events, "inner") == [{"index": i, "items": 2} for i in range(2)]


def script() -> list[Event]:
    seq = Sequencer("r1")
    return [
        seq.make("step_started", "summarize", {"index": 2, "items": 10}),
        seq.make("step_finished", "summarize", {"index": 2, "items": 10, "duration_ms": 5}),
        seq.make("step_started", "review", {"pass": 2, "max_iterations": 15}),
        seq.make(
            "step_failed",
            "review",
            {"pass": 2, "max_iterations": 15, "duration_ms": 5, "error": "no"},
        ),
        seq.make("step_started", "deep", {"index": 0, "items": 2, "pass": 1, "max_iterations": 4}),
    ]


def test_plain_lines_name_the_item_and_the_pass() -> None:
    err = io.StringIO()
    display = PlainLines(err)
    for event in script():
        display.event(event)
    assert err.getvalue().splitlines() == [
        "  summarize [item 3/10]: started",
        "  summarize [item 3/10]: finished in 5 ms",
        "  review [pass 2/15]: started",
        "  review [pass 2/15]: failed after 5 ms: no",
        "  deep [item 1/2, pass 1/4]: started",
    ]


def test_the_live_table_names_the_latest_item_and_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    err = io.StringIO()
    err.isatty = lambda: True  # type: ignore[method-assign]
    display = LiveTable(err)
    for event in script()[:4]:
        display.event(event)
    display._draw(final=True)
    text = err.getvalue()
    assert re.search(r"ok summarize \[item 3/10\]  5 ms", text)
    assert re.search(r"x review +\[pass 2/15\]  5 ms  no", text)  # the tags line up after the names
