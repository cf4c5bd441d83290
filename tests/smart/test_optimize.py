"""`blockyard optimize`: BootstrapFewShot on DSPy's DummyLM, the program saved next to the block and
used (and pinned) by later runs; bad example files and wrong blocks are clear usage errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from tests.agents.agent_kit import run_flow

Yard = Callable[[dict[str, str]], Path]

BLOCK = """
    block: tldr
    kind: smart
    description: Summarize a text in one line.
    inputs: {text: {type: string}}
    outputs: {summary: {type: string}, words: {type: integer}}
"""
EXAMPLES = """
    - {text: "Stocks fell 3% on Monday.", summary: "Stocks dropped.", words: 2}
    - {text: "The cat sat on the mat all day.", summary: "A cat rested.", words: 3}
"""


def yard(make_yard: Yard, replies: str = "{}", examples: str = EXAMPLES) -> Path:
    return make_yard(
        {
            "blockyard.yaml": f"models:\n  default:\n    provider: mock\n    replies: {replies}\n",
            "blocks/tldr.yaml": BLOCK,
            "blocks/plain.yaml": "block: plain\nkind: transform\noutputs: {x: {type: string}}\ncompute: {x: \"'x'\"}\n",
            "flows/sum.yaml": "flow: sum\ninputs: {text: {type: string}}\noutputs: [summary]\n"
            "steps:\n  - {id: s, uses: tldr}\n",
            "examples.yaml": examples,
        }
    )


def optimize(root: Path, *args: str) -> int:
    return main(["optimize", *args, "--root", str(root)])


def test_optimize_saves_a_program_that_runs_then_use(
    make_yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    # the model gets the first example right (it is bootstrapped), the second wrong (labeled as it is)
    root = yard(make_yard, replies="{tldr: [{summary: stocks dropped., words: 2}]}")
    assert optimize(root, "tldr", "--examples", str(root / "examples.yaml")) == 0
    assert capsys.readouterr().out == (
        "optimized smart block 'tldr' on 2 examples: 2 demos (1 bootstrapped, "
        "1 labeled); saved blocks/tldr.dspy.json\n"
    )
    saved = json.loads((root / "blocks" / "tldr.dspy.json").read_text())  # a Predict module's state
    assert [demo["text"] for demo in saved["demos"]] == [
        "Stocks fell 3% on Monday.",
        "The cat sat on the mat all day.",
    ]
    assert saved["lm"] is None

    # the mock follows the program's demos: an example's input gets the example's answer
    (root / "blockyard.yaml").write_text("models:\n  default:\n    provider: mock\n")
    assert run_flow(root, "sum", {"text": "The cat sat on the mat all day."}).outputs == {
        "summary": "A cat rested."
    }
    other = run_flow(root, "sum", {"text": "Something else."}).outputs
    assert other is not None and other["summary"] != "A cat rested."


def test_runs_are_pinned_to_the_program(make_yard: Yard) -> None:
    root = yard(make_yard)
    before = make_bundle(load_project(root), "sum")
    assert optimize(root, "tldr", "--examples", str(root / "examples.yaml")) == 0
    after = make_bundle(load_project(root), "sum")
    assert before.programs == {} and set(after.programs) == {"tldr"}
    assert before.digest != after.digest
    assert after.programs == type(after).from_json(after.to_json()).programs


@pytest.mark.parametrize(
    ("examples", "message"),
    [
        (
            "- {text: a, summary: b, words: 1, mood: x}",
            "examples.yaml:1:3: example 1: 'mood' is neither an input nor an output of block 'tldr'",
        ),
        (
            "- {text: a, summary: b, words: 1}\n- {text: a, words: 1}",
            "examples.yaml:2:3: example 2 has no 'summary'",
        ),
        (
            "{text: a}",
            "--examples examples.yaml: expected a list of examples, each a mapping of the block's inputs "
            "(text) and outputs (summary, words)",
        ),
    ],
)
def test_bad_examples(
    make_yard: Yard,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    examples: str,
    message: str,
) -> None:
    root = yard(make_yard, examples=examples)
    monkeypatch.chdir(root)
    assert optimize(root, "tldr", "--examples", "examples.yaml") == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (root / "blocks" / "tldr.dspy.json").exists()


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("tldrr", "unknown block 'tldrr' (did you mean 'tldr'?)"),
        ("plain", "block 'plain' is a transform block; `blockyard optimize` compiles smart blocks"),
    ],
)
def test_wrong_blocks(
    make_yard: Yard, capsys: pytest.CaptureFixture[str], block: str, message: str
) -> None:
    root = yard(make_yard)
    assert optimize(root, block, "--examples", str(root / "examples.yaml")) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_without_dspy_optimize_names_the_extra(
    make_yard: Yard, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.smart.optimize as command

    monkeypatch.setattr(command, "dspy_installed", lambda: False)
    root = yard(make_yard)
    assert optimize(root, "tldr", "--examples", str(root / "examples.yaml")) == 2
    assert capsys.readouterr().err == (
        "error: blockyard optimize needs DSPy, and the dspy extra is not installed: "
        "pip install 'dspy>=2.6'\n"
    )
