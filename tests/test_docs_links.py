"""Every relative link of README.md, CHANGELOG.md and docs/ names a file that exists and, with a `#part`,
a heading of it, as GitHub renders the page."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


def prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code, numbered from 1."""
    lines, inside = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.lstrip()):
            inside = not inside
            continue
        if not inside:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (not `-` or `_`),
    spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose(path):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_the_slugs_are_githubs() -> None:
    assert slug("Runs, the queue and the web page") == "runs-the-queue-and-the-web-page"
    assert (
        slug("The version policy: `validate --base REV`")
        == "the-version-policy-validate---base-rev"
    )
    assert slug("`blockyard diff [BASE [HEAD]]`") == "blockyard-diff-base-head"
    assert slug("In flight: `blockyard diff --state`") == "in-flight-blockyard-diff---state"


def test_every_relative_link_and_anchor_resolves() -> None:
    broken: list[str] = []
    checked = 0
    for page in pages():
        for number, line in prose(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                    continue
                checked += 1
                name, _, anchor = target.partition("#")
                file = (page.parent / name).resolve() if name else page
                where = f"{page.relative_to(REPO)}:{number}: {target}"
                if not file.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                    broken.append(f"{where} (no heading #{anchor} in {file.relative_to(REPO)})")
    assert checked > 50, "the pages link to each other"
    assert not broken, "\n".join(broken)
