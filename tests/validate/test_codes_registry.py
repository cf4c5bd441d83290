"""The code registry is complete, unambiguous and documented."""

from __future__ import annotations

import re
from pathlib import Path

from engine.validate import codes

ENGINE = Path(codes.__file__).resolve().parents[1]
DOCS = ENGINE.parent / "docs"
CODE = re.compile(r"\bBY\d{3}\b")


def _validate_path_sources() -> list[Path]:
    """The modules `blockyard validate` runs (the server's own BY6xx codes are outside this registry)."""
    loading = [ENGINE / "definitions" / "load.py", ENGINE / "definitions" / "project.py"]
    return [*loading, *sorted((ENGINE / "validate").rglob("*.py"))]


def test_every_code_validate_emits_is_registered() -> None:
    used: dict[str, str] = {}
    for path in _validate_path_sources():
        for code in CODE.findall(path.read_text(encoding="utf-8")):
            used.setdefault(code, str(path.relative_to(ENGINE.parent)))
    missing = {code: where for code, where in used.items() if code not in codes.all_codes()}
    assert missing == {}, "register these codes (engine/validate/codes.py)"


def test_no_code_is_registered_twice() -> None:
    """all_codes() merges the groups: a code in two of them would have one of its titles silently dropped."""
    seen: dict[str, int] = {}
    for group in codes.GROUPS:
        for code in group:
            seen[code] = seen.get(code, 0) + 1
    assert sorted(code for code, times in seen.items() if times > 1) == []
    assert len(codes.all_codes()) == sum(len(group) for group in codes.GROUPS)


def test_every_group_is_in_the_registry() -> None:
    """A group of codes written in the module but left out of GROUPS would be missing from all_codes()."""
    groups = [
        value
        for name, value in vars(codes).items()
        if name.isupper()
        and isinstance(value, dict)
        and name not in ("STAGES", "SEMANTIC")
        and all(str(key).startswith("BY") for key in value)
    ]
    assert len(groups) == len(codes.GROUPS) > 10
    assert all(any(group is listed for listed in codes.GROUPS) for group in groups)
    registered = set(codes.all_codes())
    assert set(codes.SEMANTIC) <= registered
    assert codes.WARNINGS - registered == set()


def test_titles_are_short_single_lines() -> None:
    registry = codes.all_codes()
    assert len(registry) > 50  # a loop over an empty registry would check nothing
    for code, title in registry.items():
        assert re.fullmatch(r"BY\d{3}", code)
        assert title and "\n" not in title and len(title) <= 100, code


def test_stages() -> None:
    assert [codes.stage(c) for c in ("BY004", "BY102", "BY201", "BY202")] == [
        "loading",
        "schema",
        "project",
        "project",
    ]
    assert codes.stage("BY305") == "semantic"
    assert codes.title("BY004") == "duplicate mapping key"
    assert codes.title("BY999") == ""


def test_every_code_is_documented() -> None:
    """In the code reference, generated from this registry (`python -m engine.reference`; tests/test_reference.py
    fails when the page is stale)."""
    documented = set(CODE.findall((DOCS / "reference" / "codes.md").read_text(encoding="utf-8")))
    assert sorted(set(codes.all_codes()) - documented) == [], "run python -m engine.reference"


def test_markdown_table_has_a_row_per_code() -> None:
    table = codes.markdown_table().splitlines()
    assert table[:2] == ["| code | stage | meaning |", "| --- | --- | --- |"]
    assert [row.split(" | ")[0].lstrip("| ") for row in table[2:]] == list(codes.all_codes())
