"""Drawings of flows: snapshot tests (set BLOCKYARD_UPDATE_SNAPSHOTS=1 to rewrite them, then review
the diff)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.compile import CompiledFlow
from engine.pinned import Bundle, make_bundle
from engine.project import load_project

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


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("BLOCKYARD_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; rerun with BLOCKYARD_UPDATE_SNAPSHOTS=1"


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
    first = build(EVERYTHING, subflows={"child": CHILD})
    assert first.mermaid() == first.mermaid()
    assert first.dot() == build(EVERYTHING, subflows={"child": CHILD}).dot()
