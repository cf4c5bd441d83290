"""The Mermaid graphs of `blockyard diff --format markdown`, rendered by Mermaid itself (the npm package,
pinned) in headless chromium (tests/review/mermaid_render.py): every graph parses and renders to an SVG in
which the steps marked added, removed and changed carry their class and its fill, and the added and
removed edges their stroke, for each kind of change the diff draws, and for every flow of the example yard."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from engine.definitions.project import load_project
from tests.review.mermaid_check import mermaid_problems
from tests.review.mermaid_render import (
    Rendered,
    marking_problems,
    mermaid_js,
    mermaid_page,
    render,
    rgb,
)
from tests.review.yardgit import BASE, POLISH, changed_yard, commit, repo
from tests.support.cli import Cli, in_process

REPO = Path(__file__).resolve().parents[2]
GREEN, RED, YELLOW = (
    "#dafbe1",
    "#ffebe9",
    "#fff8c5",
)  # the fills of added, removed, changed (engine/review/graphs.py)
RED_EDGE = "#cf222e"

Render = Callable[[list[str]], list[Rendered]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


@pytest.fixture(scope="module")
def mermaid() -> Iterator[Render]:
    with mermaid_page(mermaid_js()) as page:
        yield lambda graphs: render(page, graphs)


def graphs_of(markdown: str) -> list[str]:
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    return [t.content for t in tokens if t.type == "fence" and t.info == "mermaid"]


def rendered(cli: Cli, mermaid: Render, root: Path, *sides: str) -> list[tuple[str, Rendered]]:
    """Each Mermaid graph of the diff's Markdown with its rendering, checked: it renders, its marks show."""
    outcome = cli(root, "diff", *sides, "--format", "markdown")
    assert outcome.code == 1, outcome.err
    graphs = graphs_of(outcome.out)
    drawn = mermaid(graphs)
    for source, found in zip(graphs, drawn, strict=True):
        assert mermaid_problems(source) == [], source
        assert marking_problems(source, found) == [], source
    return list(zip(graphs, drawn, strict=True))


def fill(found: Rendered, node: str) -> Any:
    return found.nodes[node]["fill"]


def test_steps_added_removed_changed_and_a_new_flow(
    tmp_path: Path, cli: Cli, mermaid: Render
) -> None:
    root = changed_yard(tmp_path / "yard")
    (_, hello), (_, solo) = rendered(cli, mermaid, root, "HEAD~1", "HEAD")
    assert fill(hello, "default_") == rgb(GREEN) and "added" in hello.nodes["default_"]["classes"]
    assert fill(hello, "greet") == rgb(RED) and fill(hello, "shout") == rgb(YELLOW)
    assert hello.nodes["default_"]["text"].startswith("default")  # the label, not the escaped id
    assert hello.edges.count(rgb(RED_EDGE)) == 3  # start → greet → shout → end, from the base
    assert fill(solo, "s") == rgb(GREEN)


def test_a_loop_a_route_a_gate_and_a_removed_flow(
    tmp_path: Path, cli: Cli, mermaid: Render
) -> None:
    root = repo(tmp_path / "yard", {**BASE, "flows/polish.yaml": POLISH})
    changed = POLISH.replace("max_iterations: 3", "max_iterations: 5").replace(
        'contains: "A"', 'contains: "B"'
    )
    gate = "          require_approval: {timeout: 1h, on_reject: fail}\n"
    changed = changed.replace("          uses: shout\n", "          uses: shout\n" + gate)
    commit(root, "loop", {"flows/polish.yaml": changed, "flows/hello.yaml": None})
    drawn = dict(rendered(cli, mermaid, root, "HEAD~1", "HEAD"))
    (polish,) = [
        found
        for source, found in drawn.items()
        if "polish" in found.nodes or "subgraph polish" in source
    ]
    assert polish.clusters == 1  # the loop's body is a subgraph
    assert fill(polish, "pick") == rgb(YELLOW) and fill(polish, "shout") == rgb(YELLOW)
    assert rgb(RED_EDGE) in polish.edges  # the route on `contains A` is gone
    (hello,) = [found for found in drawn.values() if "greet" in found.nodes]
    assert fill(hello, "greet") == rgb(RED) and fill(hello, "shout") == rgb(RED)


def test_every_flow_of_the_example_yard(tmp_path: Path, cli: Cli, mermaid: Render) -> None:
    """Every node shape and edge kind the example flows draw (loops, parallel, subflows, gates, routes)."""
    empty, full = tmp_path / "empty", tmp_path / "full"
    for name in ("blocks", "flows", "prompts"):
        shutil.copytree(REPO / name, full / name)
        (empty / name).mkdir(parents=True)
    for yard in (empty, full):
        shutil.copy(REPO / "blockyard.yaml", yard / "blockyard.yaml")
    drawn = rendered(cli, mermaid, full, str(empty), str(full))
    assert len(drawn) == len(load_project(REPO).flows)
    assert sum(found.clusters for _, found in drawn) > 0
    for _, found in drawn:
        steps = {
            name: node for name, node in found.nodes.items() if name not in ("__start__", "__end__")
        }
        assert steps and all(node["fill"] == rgb(GREEN) for node in steps.values())


def test_the_check_bites(tmp_path: Path, cli: Cli, mermaid: Render) -> None:
    root = changed_yard(tmp_path / "yard")
    hello = graphs_of(cli(root, "diff", "HEAD~1", "HEAD", "--format", "markdown").out)[0]
    unmarked = hello.replace("    class greet removed\n", "")
    broken = hello.replace(
        'shout["shout<br/>transform shout"]', 'shout["shout<br/>transform shout"'
    )
    assert unmarked != hello and broken != hello
    found_unmarked, found_broken = mermaid([unmarked, broken])
    assert marking_problems(hello, found_unmarked)[0].startswith("node greet lacks class removed")
    assert found_broken.error is not None and "Parse error" in found_broken.error
