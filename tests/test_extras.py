"""engine/core/extras.py: what a message says to install for an optional extra — the extra's own
requirements from the installed metadata (neither distribution is on an index yet), and from a
checkout never installed, the checkout's extra."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from engine.core import extras

REPO = Path(__file__).resolve().parents[1]
# files another change is editing, which still name `pip install blockyard[...]`: empty this once
# engine/models/providers/ asks engine/core/extras.py and docs/models.md quotes their messages
PENDING: tuple[str, ...] = ()


def _name(line: str) -> str:
    return canonicalize_name(Requirement(line).name)


def test_an_extra_names_its_own_requirements() -> None:
    assert extras.install("dspy") == "pip install 'dspy>=2.6'"
    assert extras.missing("dspy") == "the dspy extra is not installed: pip install 'dspy>=2.6'"
    assert extras.install("mcp") == "pip install 'langchain-mcp-adapters>=0.1' 'mcp>=1.9'"


def test_each_extra_is_its_pyproject_list_without_the_runtime() -> None:
    """The installed metadata (this checkout, installed editable) names what pyproject.toml names: the
    runtime's list for `run`, and for every other extra its own lines, `blockyard-core[run]` left out
    (by name: a range edited since the last `uv sync` is still the installed one's)."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert {"run", "postgres", "dev"} <= set(declared)  # a loop over no extra would check nothing
    for extra, lines in declared.items():
        if extra == "dev":
            continue
        own = {_name(line) for line in lines if not line.startswith("blockyard-core")}
        found = extras.requirements(extra)
        assert found is not None, extra
        assert {_name(line) for line in found} == own, extra
        assert extras.install(extra).split()[:2] == ["pip", "install"]


def test_markers_self_references_and_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata another build tool writes: the self-reference kept as such, double quotes, a marker with
    more than the extra, names that differ in case and separators."""
    monkeypatch.setattr(
        importlib.metadata,
        "requires",
        lambda name: [
            "click>=8.1",
            'blockyard-core[run]; extra == "dspy"',
            'langgraph<2,>=1.2; extra == "run"',
            "Zeta_Pkg>=1; extra == 'dspy'",
            'dspy>=2.6; python_version >= "3.11" and extra == "dspy"',
            'langgraph<2,>=1.2; extra == "dspy"',
        ],
    )
    assert extras.requirements("dspy") == ["dspy>=2.6", "Zeta_Pkg>=1"]
    assert extras.install("run") == "pip install 'langgraph<2,>=1.2'"
    assert extras.requirements("postgres") is None


def test_without_the_metadata_the_checkout_s_extra_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def absent(name: str) -> list[str]:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", absent)
    assert extras.missing("dspy") == "the dspy extra is not installed: pip install -e '.[dspy]'"


def test_no_message_names_a_distribution_that_is_not_on_an_index() -> None:
    """`pip install blockyard[...]` and `pip install 'blockyard-core[...]'` fail until a release: the engine's
    messages and the docs name what installs today (the README is checked by whoever edits it)."""
    stale = re.compile(r"pip install\s+['\"]?blockyard(-core)?(\[|\b)")
    found = []
    for path in [
        *(REPO / "engine").rglob("*.py"),
        *(REPO / "docs").rglob("*.md"),
        *(REPO / "schemas").glob("*.json"),
    ]:
        name = path.relative_to(REPO).as_posix()
        if name in PENDING:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            # `blockyard==X.Y.Z` (the Action, for a released version), an install from Git and what a release
            # brings are no hints
            if (
                stale.search(line)
                and "==" not in line
                and "git+" not in line
                and "release" not in line.lower()
            ):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []
