"""GET /vocabulary: the engine's event types (and the other names of engine/core/events.py a client shows), which
the web page reads instead of keeping a list of its own that a new event type would not be in (issue 32: the
page showed `file_written` as a step's custom event). The page's use of it, in a browser:
tests/serve/test_serve_browser.py."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from engine.core.events import EventType, RunStatus
from engine.serve.routes.meta import WEB
from tests.serve.serve_helpers import Live


def test_the_vocabulary_is_the_engines_and_behind_the_token(
    yard: Path, serve: Callable[..., Live]
) -> None:
    live = serve(yard, watch=False, schedules=False, token="s3cret")
    with live.client() as anonymous:
        refused = anonymous.get("/vocabulary")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    with live.client(token="s3cret") as client:
        answer = client.get("/vocabulary")
    assert answer.status_code == 200
    names = answer.json()
    assert names["event_types"] == [kind.value for kind in EventType]
    assert "file_written" in names["event_types"] and "thread_name" in names["event_types"]
    # the sets, in the registry's order
    for subset in ("step_event_types", "terminal_event_types"):
        assert names[subset] == [kind for kind in names["event_types"] if kind in names[subset]]
    assert {"step_started", "file_written", "model_call"} <= set(names["step_event_types"])
    assert "run_started" not in names["step_event_types"]
    assert set(names["terminal_event_types"]) == {"run_finished", "run_failed", "approval_required"}
    assert names["reserved_event_names"] == sorted(
        {*names["event_types"], "error", "thread_id", "complete", "message", "custom", "ping"}
    )
    assert names["run_statuses"] == [status.value for status in RunStatus]


def test_the_page_keeps_no_list_of_event_types() -> None:
    """No array of the page's scripts names two event types or more: such a list is what drifted. The page
    switches on single types where it shows one differently (a model call's text), which cannot drift."""
    types = {kind.value for kind in EventType}
    lists = []
    for script in sorted(WEB.glob("*.js")):
        for literal in re.findall(r"\[[^\[\]]*\]", script.read_text(encoding="utf-8")):
            if len(set(re.findall(r"[\"'`]([a-z_]+)[\"'`]", literal)) & types) >= 2:
                lists.append(f"{script.name}: {literal[:80]}")
    assert lists == [], "ask GET /vocabulary (engine/serve/routes/meta.py) instead"
