"""The reference pages of docs/reference/ are what `python -m engine.reference` makes from the code now: a
command, an option, a key of blockyard.yaml, a block or flow key, an event type, a route or a code that
changed without the pages being regenerated fails here, naming the command to run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from engine import reference
from engine.cli import COMMANDS
from engine.core.events import EVENT_DOCS, EventType
from engine.reference import routes
from engine.spec.export import SCHEMAS
from engine.validate.codes import all_codes

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "docs" / "reference"


def test_every_reference_page_is_current() -> None:
    pages = reference.render()
    stale = [
        name
        for name, text in pages.items()
        if not (FOLDER / name).is_file() or (FOLDER / name).read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"docs/reference/ is stale ({', '.join(stale)}): run {reference.COMMAND}"
    extra = sorted(path.name for path in FOLDER.iterdir() if path.name not in pages)
    assert extra == [], (
        f"docs/reference/ holds files no generator makes: {extra} (the folder is generated)"
    )


def test_the_check_mode_names_a_stale_page(tmp_path: Path) -> None:
    for name, text in reference.render().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert reference.stale(tmp_path) == []
    (tmp_path / "codes.md").write_text("edited by hand\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("not a page\n", encoding="utf-8")
    assert reference.stale(tmp_path) == ["codes.md", "notes.md"]


def test_the_pages_cover_every_command_key_event_route_and_code() -> None:
    pages = reference.render()
    headings = set(re.findall(r"^## (blockyard [\w ]+)$", pages["cli.md"], re.M))
    assert {f"blockyard {name}" for name in COMMANDS} <= headings
    for page, filename in (
        ("config.md", "config.schema.json"),
        ("blocks.md", "block.schema.json"),
        ("flows.md", "flow.schema.json"),
    ):
        top = SCHEMAS[filename].model_json_schema(by_alias=True)["properties"]
        rows = set(re.findall(r"^\| `([\w-]+)` \|", pages[page], re.M))
        assert set(top) <= rows, (page, sorted(set(top) - rows))
    assert {str(kind) for kind in EventType} <= set(
        re.findall(r"^\| `([a-z_]+)` \|", pages["events.md"], re.M)
    )
    paths = {
        f"{method.upper()} {path}"
        for path, methods in routes.openapi()["paths"].items()
        for method in methods
    }
    assert paths <= set(re.findall(r"^### `([A-Z]+ [^`]+)`$", pages["routes.md"], re.M))
    assert list(all_codes()) == re.findall(r"^\| (BY\d{3}) \|", pages["codes.md"], re.M)


def test_every_event_type_has_its_description() -> None:
    """A new member of EventType needs its row in EVENT_DOCS (engine/core/events.py) before the page can list it."""
    assert set(EVENT_DOCS) == set(EventType), sorted(set(EventType) ^ set(EVENT_DOCS))


def test_links_in_the_pages_point_one_folder_up() -> None:
    """The registries' text is written for docs/ (or names `docs/<page>.md`); in docs/reference/ it links up."""
    for name, text in reference.render().items():
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            assert (FOLDER / target).resolve().exists(), f"{name}: a link to {target} leads nowhere"


def test_the_command_writes_and_checks(tmp_path: Path) -> None:
    """`python -m engine.reference --check` is what a contributor runs: exit 0 when current, 1 naming the
    command when not (the folder it checks is the repository's)."""
    result = subprocess.run(
        [sys.executable, "-m", "engine.reference", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    wrong = subprocess.run(
        [sys.executable, "-m", "engine.reference", "--bogus"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrong.returncode == 2 and "usage: python -m engine.reference [--check]" in wrong.stderr
