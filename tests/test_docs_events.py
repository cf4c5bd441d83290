"""Every event type the engine declares (engine/events.py) is in the generated event reference
(docs/reference/events.md, which docs/runtime.md links to instead of a table of its own) and in the lists of
reserved names of docs/flows.md and docs/serve.md: a new type that a page forgets fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.events import EVENT_TYPES, STEP_EVENT_TYPES

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_event_reference_has_every_type_and_the_runtime_page_links_to_it() -> None:
    text = (DOCS / "reference" / "events.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \| ", text, re.MULTILINE))
    assert rows >= {str(kind) for kind in EVENT_TYPES}, "run python -m engine.reference"
    assert "(reference/events.md)" in (DOCS / "runtime.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["flows.md", "serve.md", "compiler.md"])
def test_each_page_listing_the_event_types_names_every_one(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_]+)`", text))
    # compiler.md lists the events nodes write: the step ones
    wanted = {str(kind) for kind in EVENT_TYPES}
    if page == "compiler.md":
        wanted = {str(kind) for kind in STEP_EVENT_TYPES} - {"token"}
    assert wanted <= named, sorted(wanted - named)
