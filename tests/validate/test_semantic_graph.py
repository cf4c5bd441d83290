"""Unit tests of the semantic checks' building blocks: graph algorithms, control graphs, parsers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.definitions.project import load_project
from engine.spec import END
from engine.spec.flow import enum_text
from engine.validate.semantic import control
from engine.validate.semantic.config import import_path_problem
from engine.validate.semantic.graph import (
    is_cycle,
    reachable,
    reverse,
    shortest_path,
    strongly_connected,
)
from engine.validate.semantic.index import build_index
from engine.validate.semantic.routing import regex_problem
from engine.validate.semantic.templates import analyze

# -- graph algorithms ---------------------------------------------------------------------------------


def test_reachable_follows_edges_and_includes_starts() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": [], "d": ["a"]}
    assert reachable(["a"], graph) == {"a", "b", "c"}
    assert reachable(["d"], graph) == {"a", "b", "c", "d"}
    assert reachable([], graph) == set()


def test_reverse_lists_predecessors() -> None:
    assert reverse({"a": ["b", "c"], "b": ["c"]}) == {"a": [], "b": ["a"], "c": ["a", "b"]}


def test_strongly_connected_components_in_reverse_topological_order() -> None:
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["b"], "d": ["e"], "e": ["d"], "f": []}
    components = strongly_connected(["a", "b", "c", "d", "e", "f"], graph)
    assert sorted(components) == [["a"], ["b", "c"], ["d", "e"], ["f"]]
    position = {tuple(c): i for i, c in enumerate(components)}
    # a component before those reaching it
    assert position[("d", "e")] < position[("b", "c")] < position[("a",)]


def test_strongly_connected_ignores_edges_to_unknown_nodes() -> None:
    assert strongly_connected(["a"], {"a": ["zzz"]}) == [["a"]]


def test_strongly_connected_handles_long_chains_without_recursion() -> None:
    nodes = [f"n{i}" for i in range(5 * sys.getrecursionlimit())]
    chain = {n: [nodes[i + 1]] for i, n in enumerate(nodes[:-1])}
    chain[nodes[-1]] = [nodes[0]]
    assert strongly_connected(nodes, chain) == [nodes]


def test_is_cycle() -> None:
    graph = {"a": ["a"], "b": ["c"], "c": []}
    assert is_cycle(["a"], graph)
    assert not is_cycle(["b"], graph)
    assert is_cycle(["b", "c"], graph)


def test_shortest_path_and_shortest_cycle() -> None:
    graph = {"a": ["b", "x"], "b": ["c"], "c": ["a", "d"], "x": ["d"], "d": []}
    assert shortest_path("a", "d", graph) == ["a", "x", "d"]
    assert shortest_path("a", "a", graph) == ["a", "b", "c", "a"]
    assert shortest_path("d", "a", graph) is None
    assert shortest_path("a", "d", graph, allowed=lambda n: n != "x") == ["a", "b", "c", "d"]


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 7), st.lists(st.integers(0, 7), max_size=3), max_size=8))
def test_components_partition_nodes_and_agree_with_reachability(
    edges: dict[int, list[int]],
) -> None:
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    components = strongly_connected(nodes, edges)
    assert sorted(n for c in components for n in c) == nodes
    for component in components:
        for a in component:
            for b in component:
                assert b in reachable([a], edges)
    owner = {n: i for i, c in enumerate(components) for n in c}
    for a in nodes:
        for b in nodes:
            if owner[a] != owner[b]:
                assert not (b in reachable([a], edges) and a in reachable([b], edges))


# -- control graphs -----------------------------------------------------------------------------------

BLOCK = """
block: t
kind: transform
inputs: {x: {type: any, default: 1}}
outputs: {y: {type: any}}
compute: {y: x}
"""
DECIDE = """
block: d
kind: decide
outputs: {c: {type: string, enum: [yes, no, maybe]}}
prompt: {user: pick}
"""


def _graph(make_yard: Callable[[dict[str, str]], Path], flow: str) -> control.ControlGraph:
    root = make_yard({"blocks/t.yaml": BLOCK, "blocks/d.yaml": DECIDE, "flows/f.yaml": flow})
    project = load_project(root)
    assert project.diagnostics == []
    index = build_index(project, project.flows["f"])
    return control.build(index.root)


def _edges(graph: control.ControlGraph) -> set[tuple[str, str, str, bool]]:
    return {(e.source, e.target, e.kind, e.ran) for e in graph.edges}


def test_list_order_and_needs(make_yard: Callable[[dict[str, str]], Path]) -> None:
    graph = _graph(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: b, uses: t, needs: [a]}
          - {id: c, uses: t, needs: [a]}
          - {id: j, uses: t, needs: [b, c]}
        """,
    )
    assert _edges(graph) == {
        ("a", "b", "needs", True),
        ("a", "c", "needs", True),
        ("b", "j", "needs", True),
        ("c", "j", "needs", True),
        ("j", END, "order", True),
    }
    assert graph.entry == "a" and graph.forward
    assert list(graph.fan_outs()) == [("a", ["b", "c"])]


def test_a_step_whose_follower_has_needs_ends_unless_needed(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    graph = _graph(
        make_yard,
        """
        flow: f
        steps:
          - {id: a, uses: t}
          - {id: side, uses: t, needs: [a]}
          - {id: b, uses: t}
          - {id: c, uses: t, needs: [a]}
        """,
    )
    assert ("side", "b", "order", True) in _edges(graph)
    assert ("b", END, "order", True) in _edges(graph)  # c waits for a only: b's branch ends
    assert ("c", END, "order", True) in _edges(graph)


def test_routing_steps_do_not_continue_in_order(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    graph = _graph(
        make_yard,
        """
        flow: f
        steps:
          - id: r
            router: {value: "{{ inputs }}", routes: [{contains: x, goto: b}], default: end}
          - {id: a, uses: t, goto: end}
          - {id: b, uses: t, goto: a, max_visits: 2, on_max_visits: end}
        """,
    )
    assert _edges(graph) == {
        ("r", "b", "route", True),
        ("r", END, "route", True),
        ("a", END, "goto", True),
        ("b", "a", "goto", True),
        ("b", END, "max_visits", False),
    }
    assert not graph.forward


def test_partial_branches_fall_through_in_order(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    graph = _graph(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {"yes": end, "no": other}}
          - {id: next, uses: t, goto: end}
          - {id: other, uses: t}
        """,
    )
    assert ("pick", "next", "order", True) in _edges(graph)  # `maybe` has no branch
    full = _graph(
        make_yard,
        """
        flow: f
        steps:
          - {id: pick, uses: d, branches: {"yes": end, "no": other, maybe: other}}
          - {id: next, uses: t}
          - {id: other, uses: t}
        """,
    )
    assert not any(e.source == "pick" and e.target == "next" for e in full.edges)


def test_approval_exits_skip_the_step(make_yard: Callable[[dict[str, str]], Path]) -> None:
    graph = _graph(
        make_yard,
        """
        flow: f
        steps:
          - {id: gate, approval: {on_reject: other, timeout: 1h, on_timeout: other}}
          - {id: work, uses: t, require_approval: true}
          - {id: other, uses: t}
        """,
    )
    assert {
        ("gate", "other", "reject", False),
        ("gate", "other", "timeout", False),
        ("work", END, "reject", False),
        ("gate", "work", "order", True),
    } <= _edges(graph)


def test_decide_values_as_branch_keys() -> None:
    assert enum_text(True) == "true" and enum_text(None) == "null"
    assert enum_text(3) == "3" and enum_text("x") == "x"


# -- small parsers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("tools.weather:forecast", None),
        ("weather:forecast", None),
        ("tools..weather:f", "'(empty)' is not a valid module name segment"),
        ("class.x:f", "'class' is a Python keyword"),
        ("tools:def", "'def' is not a valid function name"),
        ("tools", "must be module:function"),
    ],
)
def test_import_path_problem(path: str, problem: str | None) -> None:
    found = import_path_problem(path)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_regex_problem_uses_re2_without_printing(capfd: pytest.CaptureFixture[str]) -> None:
    assert regex_problem("^(bug|crash)") is None
    assert regex_problem("(a") == "missing ): (a"
    assert regex_problem("(?<=a)b") == "invalid perl operator: (?<="  # lookbehind: RE2 has none
    assert capfd.readouterr().err == ""


# -- template analysis ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expression", "paths"),
    [
        (
            "{{ context.a.b }} and {{ inputs['x'] }}",
            False,
            [("context", "a", "b"), ("inputs", "x")],
        ),
        (
            "{% for x in items %}{{ x.y }}{{ loop.index }}{% endfor %}",
            False,
            [("items",), ("loop", "index")],
        ),
        ("{% set z = 1 %}{{ z }} {{ a[b.c].d }}", False, [("a",), ("b", "c")]),
        ("{% macro m(p) %}{{ p }}{% endmacro %}{{ m(q) }}", False, [("q",)]),
        ("steps.s.outputs.y | length > 2", True, [("steps", "s", "outputs", "y")]),
        ("{{ steps.a-b }}", False, [("b",), ("steps", "a")]),  # `-` is subtraction in a template
    ],
)
def test_analyze_lists_variable_paths(
    source: str, expression: bool, paths: list[tuple[str, ...]]
) -> None:
    assert list(analyze(source, expression).paths) == paths


def test_analyze_reports_guards_unknown_filters_and_syntax() -> None:
    found = analyze("{{ context.x | default('n') | shout }} {{ 1 is oddd }}", False)
    assert found.guarded == (("context", "x"),)
    assert found.unknown == (("filter", "shout"), ("test", "oddd"))
    assert analyze("{{ a", False).error == (
        "template syntax error: unexpected end of template, expected 'end of print statement'."
    )
    # too deep: an error, not a crash
    assert analyze("(" * 2000 + "1" + ")" * 2000, True).error is not None


_PIECE = st.sampled_from(
    [
        "{{ a.b }}",
        "{{ inputs.x }}",
        " text ",
        "{{",
        "}}",
        "{{ none }}",
        "{{ a-b }}",
        "{% if a %}",
        "{% endif %}",
        "{{ c | upper }}",
        "{# note #}",
        "\n",
        "{{- d -}}",
        "{{ 'x}}' }}",
        "{{ e.f }}",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECE, max_size=6), st.booleans())
def test_fast_path_agrees_with_the_jinja_parser(pieces: list[str], expression: bool) -> None:
    from engine.validate.semantic import templates

    source = "".join(pieces)
    analyze.cache_clear()
    fast = templates.analyze(source, expression)
    simple = templates._simple_paths
    try:
        templates._simple_paths = lambda *_: None
        analyze.cache_clear()
        slow = templates.analyze(source, expression)
    finally:
        templates._simple_paths = simple
        analyze.cache_clear()
    assert fast == slow
