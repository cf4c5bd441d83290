"""What `blockyard run` shows while a run goes: a live table of steps on a terminal, plain lines
in logs, JSON lines with --json.

Progress goes to stderr so that stdout carries only the result (outputs as YAML, or the events
with --json): `blockyard run hello > out.yaml` keeps working.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from engine.core.events import (
    APPROVAL_DECIDED,
    FILE_WRITTEN,
    RUN_STARTED,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    TOOL_CALL,
    WARNING,
    Event,
)

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
REFRESH = 0.1  # seconds between redraws of the live table


def format_duration(seconds: float | None) -> str:
    """12 ms, 1.24 s, 2m 03s."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def _fits(stream: TextIO, text: str) -> bool:
    try:
        text.encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class Style:
    """ANSI colours unless NO_COLOR is set (https://no-color.org) or the stream is not a terminal."""

    def __init__(self, stream: TextIO, *, live: bool) -> None:
        self.colour = live and "NO_COLOR" not in os.environ
        fancy = _fits(stream, "✓✗⚠" + SPINNER)
        self.ok, self.fail, self.warn = ("✓", "✗", "⚠") if fancy else ("ok", "x", "!")
        self.spinner = SPINNER if fancy else "-\\|/"

    def paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour and text else text

    def green(self, text: str) -> str:
        return self.paint(text, "32")

    def red(self, text: str) -> str:
        return self.paint(text, "31")

    def yellow(self, text: str) -> str:
        return self.paint(text, "33")

    def dim(self, text: str) -> str:
        return self.paint(text, "2")


@dataclass
class _Row:
    step: str
    started: float
    running: int = 0
    done: int = 0
    failed: int = 0
    busy: float = 0.0  # summed durations of finished executions
    detail: str = ""
    where: str = ""  # " [item 3/10]", " [pass 2/15]" of the latest event

    @property
    def finished(self) -> bool:
        return self.running == 0


class Progress:
    """Base display: remembers the run id and the mock-model note, prints the note once."""

    def __init__(self, err: TextIO | None = None) -> None:
        self.err = err or sys.stderr
        self.run_id: str | None = None
        self._noted = False

    def event(self, event: Event) -> None:
        if event.type == RUN_STARTED:
            self.run_id = event.run_id
            note = event.data.get("note")
            if note and not self._noted:
                self._noted = True
                self.err.write(f"note: {note}\n")
                self.err.flush()

    async def start(self) -> None:
        """Begin any periodic redraw (needs the running loop)."""

    async def stop(self) -> None:
        """End the display; afterwards plain writes to the streams are safe."""


class JsonLines(Progress):
    """--json: one event per line on stdout."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        super().__init__(err)
        self.out = out or sys.stdout

    def event(self, event: Event) -> None:
        super().event(event)
        self.out.write(event.to_json() + "\n")
        self.out.flush()


class PlainLines(Progress):
    """Not a terminal (CI logs, pipes): one line per step start and end, nothing redrawn."""

    def __init__(self, err: TextIO | None = None) -> None:
        super().__init__(err)
        self.style = Style(self.err, live=False)
        self._started: dict[str, list[float]] = {}

    def event(self, event: Event) -> None:
        super().event(event)
        line = self._line(event)
        if line:
            self.err.write(line + "\n")
            self.err.flush()

    def _line(self, event: Event) -> str | None:
        step = event.step or ""
        if event.type == RUN_STARTED:
            resumed = " (resumed)" if event.data.get("resumed") else ""
            return f"run {event.run_id}: {event.data.get('flow')}@{event.data.get('version')} started{resumed}"
        step += where(event)
        if event.type == STEP_STARTED:
            return f"  {step}: started"
        if event.type == STEP_FINISHED:
            return f"  {step}: finished in {format_duration(_seconds(event))}"
        if event.type == STEP_FAILED:
            reason = _reason(event)
            return f"  {step}: failed after {format_duration(_seconds(event))}" + (
                f": {reason}" if reason else ""
            )
        if event.type == WARNING:
            return (
                f"  warning{f' ({step})' if step else ''}: {event.data.get('message', event.data)}"
            )
        if event.type == APPROVAL_DECIDED:
            data = event.data
            who = f" by {data['actor']}" if data.get("actor") else ""
            why = f" ({data['reason']})" if data.get("reason") else ""
            verdict = {"approve": "approved", "reject": "rejected"}.get(
                str(data.get("decision")), "timed out"
            )
            return f"  {data.get('gate') or step}: {verdict}{who}{why}"
        if event.type == TOOL_CALL:
            tool = event.data.get("tool") or event.data.get("name", "?")
            # agents report each call twice: started, then ok or error
            status = event.data.get("status")
            if status == "ok":
                return None
            if status == "error":
                return f"  {step}: tool {tool} failed: {event.data.get('error')}"
            if status == "rejected":  # a person's decision (approve_tools): it did not run
                return f"  {step}: tool {tool} rejected, not run"
            return f"  {step}: tool {tool}"
        if event.type == FILE_WRITTEN:
            return f"  {step}: wrote {event.data.get('path')} ({event.data.get('bytes')} bytes)"
        return None


class LiveTable(Progress):
    """A terminal: one line per step with a spinner and a running clock, redrawn in place.

    Lines of steps that are over (and everything above them) are printed for good; only the
    rest is redrawn, so a long flow scrolls normally. A step run again later (a loop) gets a
    new line.
    """

    def __init__(self, err: TextIO | None = None) -> None:
        super().__init__(err)
        self.style = Style(self.err, live=True)
        self._rows: list[_Row] = []  # not yet printed for good
        self._open: dict[str, _Row] = {}  # step -> its row among _rows
        self._width = 0
        self._drawn = 0  # lines of _rows currently on screen
        self._frame = 0
        self._ticker: asyncio.Task[None] | None = None
        self._notes: list[str] = []

    async def start(self) -> None:
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        self._draw(final=True)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(REFRESH)
            self._frame += 1
            if any(row.running for row in self._rows):
                self._draw()

    def _row(self, step: str) -> _Row:
        row = self._open.get(step)
        if row is None:
            row = self._open[step] = _Row(step, time.monotonic())
            self._rows.append(row)
            self._width = max(self._width, len(step))
        return row

    def event(self, event: Event) -> None:
        super().event(event)
        step = event.step
        if event.type == STEP_STARTED and step:
            row = self._row(step)
            row.running += 1
            row.where = where(event)
        elif event.type in (STEP_FINISHED, STEP_FAILED) and step:
            row = self._row(step)
            row.where = where(event) or row.where
            row.running = max(0, row.running - 1)
            row.busy += _seconds(event) or 0.0
            if event.type == STEP_FAILED:
                row.failed += 1
                row.detail = _reason(event)
            else:
                row.done += 1
        elif event.type == WARNING:
            self._notes.append(
                f"{self.style.yellow(self.style.warn)} {event.data.get('message', event.data)}"
            )
        elif event.type == RUN_STARTED:
            resumed = " (resumed)" if event.data.get("resumed") else ""
            self._notes.append(
                self.style.dim(
                    f"run {event.run_id}: {event.data.get('flow')}@"
                    f"{event.data.get('version')}{resumed}"
                )
            )
        else:
            return
        self._draw()

    def _render(self, row: _Row) -> str:
        s = self.style
        name = row.step.ljust(self._width)
        count = row.done + row.failed + row.running
        times = (f" ×{count}" if count > 1 else "") + row.where
        if row.running:
            clock = row.busy if row.done + row.failed else time.monotonic() - row.started
            mark = s.spinner[self._frame % len(s.spinner)]
            return f"  {s.yellow(mark)} {name}{times}  {s.dim(format_duration(clock))}"
        if row.failed:
            detail = f"  {row.detail}" if row.detail else ""
            return f"  {s.red(s.fail)} {name}{times}  {s.dim(format_duration(row.busy))}{s.red(detail)}"
        return f"  {s.green(s.ok)} {name}{times}  {s.dim(format_duration(row.busy))}"

    def _draw(self, *, final: bool = False) -> None:
        out = self.err
        if self._drawn:
            out.write(f"\033[{self._drawn}F\033[J")  # back to the first redrawn line, clear below
        for note in self._notes:
            out.write(note + "\n")
        self._notes.clear()
        done = len(self._rows)
        if not final:
            done = next(
                (i for i, row in enumerate(self._rows) if not row.finished), len(self._rows)
            )
        for row in self._rows[:done]:
            out.write(self._render(row) + "\n")
            if self._open.get(row.step) is row:
                del self._open[row.step]
        del self._rows[:done]
        for row in self._rows:
            out.write(self._render(row) + "\n")
        self._drawn = len(self._rows)
        out.flush()


def where(event: Event) -> str:
    """' [item 3/10]' for a map item or foreach iteration, ' [pass 2/15]' in a loop body, both when
    nested, '' otherwise (from the events' `index`, `items`, `pass`, `max_iterations`)."""
    data = event.data
    parts = []
    index, items = data.get("index"), data.get("items")
    if isinstance(index, int):
        parts.append(f"item {index + 1}" + (f"/{items}" if isinstance(items, int) else ""))
    number, most = data.get("pass"), data.get("max_iterations")
    if isinstance(number, int):
        parts.append(f"pass {number}" + (f"/{most}" if isinstance(most, int) else ""))
    return f" [{', '.join(parts)}]" if parts else ""


def _reason(event: Event) -> str:
    text = str(event.data.get("error") or event.data.get("reason") or "")
    # the line already names the step; drop a cause's own "flow 'f', step 's': " prefix
    prefix = re.match(r"flow '[^']*', step '" + re.escape(event.step or "") + r"': ", text)
    return text[prefix.end() :] if prefix else text


def _seconds(event: Event) -> float | None:
    value: Any = event.data.get("duration_ms")
    return float(value) / 1000 if isinstance(value, int | float) else None


def choose(*, as_json: bool, stream: TextIO | None = None) -> Progress:
    """The display for this terminal: JSON lines, the live table, or plain lines."""
    if as_json:
        return JsonLines()
    err = stream or sys.stderr
    live = err.isatty() and os.environ.get("TERM", "") != "dumb"
    return LiveTable(err) if live else PlainLines(err)
