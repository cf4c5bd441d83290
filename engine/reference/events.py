"""docs/reference/events.md: every event type, from the registry of engine/core/events.py (`EventType`, its
descriptions in `EVENT_DOCS`, and the sets that say which are step events, terminal, not stored, reserved)."""

from __future__ import annotations

from engine.core.events import (
    EVENT_DOCS,
    EVENT_TYPES,
    NOT_STORED,
    RESERVED_EVENT_NAMES,
    STEP_EVENT_TYPES,
    TERMINAL_TYPES,
)
from engine.reference.markdown import code, from_docs, header, table

INTRO = (
    "One schema for `blockyard run --json`, the server's server-sent events and the trace table "
    "(`blockyard runs show --json`, `GET /runs/{id}/events`). How runs emit them and what a client can rely "
    "on: [runtime.md](../runtime.md#events)."
)

ENVELOPE = """```json
{"type": "step_finished", "run_id": "1m80jbkpa8843", "seq": 3, "step": "greet",
 "time": "2026-11-22T02:46:24.767Z", "data": {"block": "greet", "outputs": {"greeting": "..."}, "duration_ms": 2}}
```

| field | meaning |
| --- | --- |
| `type` | the event type (below), or a step's custom event name |
| `run_id` | the run |
| `seq` | counts from 1 within a run and goes on across resumes |
| `step` | the step it concerns (see the table), or null |
| `time` | when it happened: ISO-8601 UTC with milliseconds |
| `data` | what the type carries (below) |"""

WHERE = (
    "**Where a step runs**, on its `step_started`, `step_finished` and `step_failed` events: a map item or "
    "foreach iteration carries `index` (0-based) and `items` (how many items the map or foreach has); a step "
    "of a loop body carries `pass` (1-based) and `max_iterations` of its innermost loop; a step nested in both "
    "carries all four. A map's or foreach's own events carry no `index`; its `step_finished` has `items`, the "
    "number of items it ran. Step ids inside subflows carry the calling step as a prefix (`research.search`)."
)


def page() -> str:
    rows = []
    for kind in EVENT_TYPES:
        doc = EVENT_DOCS[kind]
        notes = [
            what
            for what, included in (
                ("step event", kind in STEP_EVENT_TYPES),
                ("ends an execution", kind in TERMINAL_TYPES),
                ("streamed, not stored", kind in NOT_STORED),
            )
            if included
        ]
        rows.append([code(str(kind)), doc.step, from_docs(doc.data), ", ".join(notes) or "–"])
    custom = sorted(
        name for name in RESERVED_EVENT_NAMES if name not in {str(kind) for kind in EVENT_TYPES}
    )
    lines = header("Event reference", "engine/core/events.py (`EventType`, `EVENT_DOCS`)", INTRO)
    lines += ["## The envelope", "", ENVELOPE, "", "## Types", ""]
    lines += table(["type", "step", "data", "notes"], rows)
    lines += [
        "*Step events* are written by the steps of the compiled graph; the others by the runtime. Every "
        "execution of a run (its start and each resume) begins with `run_started` and ends with exactly one "
        "event that *ends an execution*.",
        "",
        WHERE,
        "",
        "## Custom events",
        "",
        "A type that is none of the above is a step's own event (`emit:`, "
        "[flows.md](../flows.md#custom-events)): it comes right after that step's `step_finished`, is stored "
        "and numbered like the others, and its `data` is exactly what the step rendered. Its name may not be "
        "an engine event type, nor one of the names the server uses on its streams: "
        + ", ".join(code(name) for name in custom)
        + " (BY425).",
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"
