"""Drawings of flows: snapshot tests (set BLOCKYARD_UPDATE_SNAPSHOTS=1 to rewrite them: each rewrite
shows its diff in pytest's warnings summary; review it, and test_compile_draw_structure.py checks the
graph of every drawing and snapshot against the flow's wiring worked out from its YAML)."""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.compile import CompiledFlow
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import load_project

SNAPSHOTS = Path(__file__).parent / "snapshots"

EVERYTHING = """
    flow: everything
    inputs:
      status: {type: string}
    outputs: [log]
    steps:
      - id: triage
        router:
          value: "{{ inputs.status }}"
          routes:
            - {regex: "^err", goto: fix}
            - {expr: "context.score > 0.8", goto: publish}
          default: review
      - {id: fix, uses: mark, with: {tag: fix}, max_visits: 3, on_max_visits: publish}
      - id: review
        loop:
          max_iterations: 15
          until: context.qa_passed
          steps:
            - {id: qa, uses: inc}
            - {id: apply, uses: mark, with: {tag: applied}}
      - id: ask
        uses: pick
        branches: {yes: publish, no: triage}
      - id: totals
        foreach: {items: "[1, 2]", as: order, collect: lines, steps: [{id: line, uses: inc}]}
      - id: implement
        map: {items: "context.files", as: file, uses: echo, max_concurrency: 8, collect: drafts,
              with: {text: "{{ file }}"}}
      - id: drafts
        map:
          items: "context.files"
          collect: checked
          steps:
            - {id: draft, uses: inc}
            - {id: check, uses: mark, with: {tag: "{{ item }} & \\"quoted\\" <ok>"}}
      - {id: research, flow: child, with: {a: 1}}
      - {id: publish, uses: mark, with: {tag: publish}}
    """

DAG = """
    flow: dag
    outputs: [total]
    steps:
      - {id: a, uses: inc}
      - {id: b1, uses: inc, needs: [a]}
      - {id: b2, uses: inc}
      - {id: c, uses: inc, needs: [a]}
      - {id: join, uses: add, needs: [b2, c], with: {a: 1, b: 2}, outputs: {sum: total}}
    """

CHILD = """
    flow: child
    inputs:
      a: {type: number}
    outputs: [sum]
    steps:
      - {id: plus, uses: add, with: {b: 1}}
    """


class SnapshotRewritten(UserWarning):
    """A snapshot was rewritten from the output: its diff, for the person who asked for it to review."""


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    stored = path.read_text(encoding="utf-8") if path.exists() else ""
    if os.environ.get("BLOCKYARD_UPDATE_SNAPSHOTS") and text != stored:
        diff = "".join(
            difflib.unified_diff(
                stored.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"a/{name}",
                f"b/{name}",
            )
        )
        path.write_text(text, encoding="utf-8")
        warnings.warn(SnapshotRewritten(f"rewrote {name}:\n{diff}"), stacklevel=2)
        stored = text
    assert text == stored, (
        f"{name} changed; rerun with BLOCKYARD_UPDATE_SNAPSHOTS=1 and review the diff it shows"
    )


@pytest.fixture
def hello(repo_root: Path) -> Bundle:
    return make_bundle(load_project(repo_root), "hello")


def test_hello_mermaid(hello: Bundle) -> None:
    from engine.compile.draw import draw

    check("hello.mmd", draw(hello, "mermaid"))


@pytest.mark.parametrize(("flow", "name"), [(EVERYTHING, "everything"), (DAG, "dag")])
def test_mermaid_and_dot(build: Callable[..., CompiledFlow], flow: str, name: str) -> None:
    compiled = build(flow, subflows={"child": CHILD})
    check(f"{name}.mmd", compiled.mermaid())
    check(f"{name}.dot", compiled.dot())


def test_drawing_is_deterministic(build: Callable[..., CompiledFlow]) -> None:
    # two compilations of the same flow draw the same text, and that text is the stored snapshot
    first, second = (build(EVERYTHING, subflows={"child": CHILD}) for _ in range(2))
    assert (
        first.mermaid()
        == second.mermaid()
        == (SNAPSHOTS / "everything.mmd").read_text(encoding="utf-8")
    )
    assert first.dot() == second.dot() == (SNAPSHOTS / "everything.dot").read_text(encoding="utf-8")
