"""Mermaid for real: the `mermaid` npm package, pinned, renders the graphs `blockyard diff --format markdown`
writes, in the headless Chromium the suite already drives through Playwright's `executable_path`
(tests/support/chromium.py; never `playwright install`).

The package is installed with `npm install --prefix DIR mermaid@MERMAID_VERSION` from the npm registry
into a cache folder (`$BLOCKYARD_TEST_CACHE`, else `~/.cache/blockyard-tests`), once per version, by
tests/support/npm.py. `$BLOCKYARD_MERMAID` may name a `mermaid.min.js` instead (a machine without the registry).
Without npm or chromium the tests skip with the reason, and fail under `CI=true` (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from tests.conftest import skip_or_fail
from tests.support.chromium import ARGS, INSTALL
from tests.support.chromium import find as find_chromium
from tests.support.npm import npm_package

MERMAID_VERSION = "11.17.2"

# Parse, render, and read back from the SVG (placed in the page, so that CSS applies) what a reader sees:
# each node's classes and the fill of its shape, each edge's stroke. Node ids are `<render id>-flowchart-<id>-<n>`.
RENDER_JS = """
async (graphs) => {
  mermaid.initialize({startOnLoad: false, securityLevel: 'strict'});
  const results = [];
  for (const [i, source] of graphs.entries()) {
    const id = 'graph' + i;
    try {
      await mermaid.parse(source);
      const {svg} = await mermaid.render(id, source);
      const box = document.createElement('div');
      document.body.appendChild(box);
      box.innerHTML = svg;
      const root = box.firstElementChild;
      const nodes = {};
      for (const node of root.querySelectorAll('g.node')) {
        const name = node.id.replace(new RegExp('^' + id + '-flowchart-'), '').replace(/-[0-9]+$/, '');
        const shape = node.firstElementChild;
        nodes[name] = {classes: (node.getAttribute('class') || '').split(/ +/), text: node.textContent,
                       fill: shape ? getComputedStyle(shape).fill : null};
      }
      const edges = [...root.querySelectorAll('path.flowchart-link')].map(p => getComputedStyle(p).stroke);
      results.push({tag: root.tagName, nodes, edges, clusters: root.querySelectorAll('g.cluster').length,
                    error: null});
    } catch (e) {
      results.push({tag: null, nodes: {}, edges: [], clusters: 0, error: String((e && e.message) || e)});
    }
  }
  return results;
}
"""


@dataclass
class Rendered:
    """One graph as Mermaid drew it, or the error it raised."""

    error: str | None
    tag: str | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: list[str] = field(default_factory=list)
    clusters: int = 0


def mermaid_js(cache: Path | None = None) -> Path:
    """`mermaid.min.js` of MERMAID_VERSION, installed from the npm registry into `cache` if not there yet."""
    given = os.environ.get("BLOCKYARD_MERMAID")
    if given:
        return Path(given)
    return (
        npm_package("mermaid", MERMAID_VERSION, cache)
        / "node_modules"
        / "mermaid"
        / "dist"
        / "mermaid.min.js"
    )


def chromium_path() -> str:
    path = find_chromium()
    if not path:
        skip_or_fail(f"rendering Mermaid needs a headless Chromium: {INSTALL}")
        raise AssertionError("unreachable")
    return path


@contextmanager
def mermaid_page(script: Path) -> Iterator[Any]:
    """A blank page of headless chromium with Mermaid loaded."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=ARGS
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.set_content("<!doctype html><html><body></body></html>")
            page.add_script_tag(path=str(script))
            yield page
        finally:
            browser.close()


def render(page: Any, graphs: list[str]) -> list[Rendered]:
    return [Rendered(**found) for found in page.evaluate(RENDER_JS, graphs)]


def rgb(hex_color: str) -> str:
    """#dafbe1 -> rgb(218, 251, 225), as getComputedStyle writes a colour."""
    red, green, blue = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


def marking_problems(source: str, drawn: Rendered) -> list[str]:
    """What of the marks the source asks for (`class ids name`, `classDef`, `linkStyle`) the SVG lacks."""
    if drawn.error is not None:
        return [f"does not render: {drawn.error}"]
    problems = [] if drawn.tag == "svg" else [f"rendered to <{drawn.tag}>, not <svg>"]
    fills = {
        m[1]: m[2] for m in re.finditer(r"^\s+classDef (\w+) fill:(#[0-9a-f]{6})", source, re.M)
    }
    for match in re.finditer(r"^\s+class (\S+) (\w+)$", source, re.M):
        for node in match[1].split(","):
            found = drawn.nodes.get(node)
            if found is None:
                problems.append(f"node {node} is not in the SVG")
            elif match[2] not in found["classes"]:
                problems.append(f"node {node} lacks class {match[2]}: {found['classes']}")
            elif match[2] in fills and found["fill"] != rgb(fills[match[2]]):
                problems.append(
                    f"node {node} is filled {found['fill']}, not {match[2]}'s {fills[match[2]]}"
                )
    edge_count = len(re.findall(r"^\s+\S+ (?:-->|-\.->)", source, re.M))
    if len(drawn.edges) != edge_count:
        problems.append(f"{len(drawn.edges)} edges drawn of {edge_count}")
    for match in re.finditer(r"^\s+linkStyle ([\d,]+) stroke:(#[0-9a-f]{6})", source, re.M):
        for index in map(int, match[1].split(",")):
            if index >= len(drawn.edges) or drawn.edges[index] != rgb(match[2]):
                stroke = drawn.edges[index] if index < len(drawn.edges) else "missing"
                problems.append(f"edge {index} is stroked {stroke}, not {match[2]}")
    return problems
