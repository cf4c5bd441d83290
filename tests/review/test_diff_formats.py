"""`blockyard diff` as text, JSON and Markdown: the Markdown renders to HTML (markdown-it-py) and its
Mermaid graphs pass a structural check of the flowchart grammar (tests/review/mermaid_check.py);
the command imports no LangGraph. How long a diff of the example yard takes is measured in bench/bench_diff.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from engine.review.command import diff_yard
from tests.review.mermaid_check import mermaid_problems
from tests.review.yardgit import changed_yard, commit, repo
from tests.support.cli import Cli, in_process
from tests.support.example import copy_example_yard

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


def test_text_format(tmp_path: Path, cli: Cli) -> None:
    root = changed_yard(tmp_path / "yard")
    outcome = cli(root, "diff", "HEAD~1", "HEAD")
    assert outcome.code == 1
    lines = outcome.out.splitlines()
    assert lines[0].startswith("blockyard diff: HEAD~1 (") and " → HEAD (" in lines[0]
    assert "~ flow hello (changed, v1) flows/hello.yaml" in lines
    assert "    - step greet removed" in lines
    assert "    + step default added" in lines
    assert "+ flow solo (added, v1) flows/solo.yaml" in lines
    assert "~ block greet (changed, v1) blocks/greet.yaml" in lines
    assert "    prompt.user changed" in lines
    assert lines[-1] == "2 flows (1 changed, 1 added); 1 block (1 changed); 1 version problem"


def test_json_format(tmp_path: Path, cli: Cli) -> None:
    root = changed_yard(tmp_path / "yard")
    outcome = cli(root, "diff", "HEAD~1", "HEAD", "--format", "json")
    found = json.loads(outcome.out)
    assert set(found) == {"base", "head", "changed", "flows", "blocks", "config", "problems"}
    assert [(f["name"], f["status"]) for f in found["flows"]] == [
        ("hello", "changed"),
        ("solo", "added"),
    ]
    assert [p["code"] for p in found["problems"]] == ["BY800"]


def test_markdown_renders_and_its_mermaid_graphs_parse(tmp_path: Path, cli: Cli) -> None:
    root = changed_yard(tmp_path / "yard")
    outcome = cli(root, "diff", "HEAD~1", "HEAD", "--format", "markdown")
    assert outcome.code == 1
    tokens = MarkdownIt("commonmark").enable("table").parse(outcome.out)
    html = MarkdownIt("commonmark").enable("table").render(outcome.out)
    graphs = [t.content for t in tokens if t.type == "fence" and t.info == "mermaid"]
    assert len(graphs) == 2  # hello (changed) and solo (added)
    for graph in graphs:
        assert mermaid_problems(graph) == [], graph
    hello = graphs[0]
    # `default` is a Mermaid keyword: the node is default_
    assert "    class default_ added" in hello
    assert "    class greet removed" in hello
    assert "    class shout changed" in hello
    assert "greet --> shout" in hello and "linkStyle" in hello  # the removed edge, drawn and styled
    # the table keeps its rows (pipes in values escaped), YAML text never becomes HTML
    assert "<b>" not in html and "&lt;b&gt;|{{ inputs.name }}|&lt;/b&gt;" in html
    assert html.count("<table>") == 2
    assert "<h3>~ flow hello (changed, v1) flows/hello.yaml</h3>" in html
    # the prompt diff holds a ``` line: its fence is longer, so the rest of the page stays intact
    assert "<summary>prompt diff</summary>" in html and "````diff" in outcome.out
    assert mermaid_problems("flowchart TD\n    a --> b\n") == [
        "edge to an unknown node: a -> b"
    ]  # the check bites


def test_diff_imports_no_langgraph(tmp_path: Path) -> None:
    root = changed_yard(tmp_path / "yard")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "engine",
            "diff",
            "HEAD~1",
            "HEAD",
            "--format",
            "markdown",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "engine.review.graphs" in modules
    assert (
        sorted(
            m for m in modules if m.split(".")[0].startswith(("langgraph", "langchain", "fastapi"))
        )
        == []
    )


def test_diff_of_two_revisions_of_the_example_yard(tmp_path: Path) -> None:
    """What bench/bench_diff.py times (target: under 1 s); the time is measured there, not asserted here."""
    root = copy_example_yard(tmp_path / "example")
    repo_files: dict[str, str | None] = {}
    repo(root, repo_files)  # the example yard as it is, committed
    hello = (root / "flows/hello.yaml").read_text(encoding="utf-8")
    commit(
        root,
        "change",
        {
            "flows/hello.yaml": hello.replace("Greet someone", "Greet somebody"),
            "blocks/shout.yaml": (root / "blocks/shout.yaml").read_text().replace("upper", "lower"),
        },
    )
    found = diff_yard(root, "HEAD~1", "HEAD", draw=True).diff
    assert [b.name for b in found.blocks] == ["shout"] and found.flow("hello") is not None
