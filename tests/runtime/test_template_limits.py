"""Templates over their limits at run time: a failed step that names the step and the limit, quickly,
with nothing huge stored (docs/flows.md, "Limits of templates")."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.conftest import Outcome
from tests.support.state import stored_bytes

Cli = Callable[..., Outcome]

ECHO = """
    block: echo
    description: Copy a text.
    kind: transform
    inputs:
      text: {type: any}
    outputs:
      copy: {type: any}
    compute:
      copy: text
"""

SHOUT = """
    flow: shout
    inputs:
      n: {type: integer}
      text: {type: string, default: a}
    outputs: [copy]
    steps:
      - id: shout
        uses: echo
        with: {text: "{{ inputs.text * inputs.n }}"}
"""

CENTER = """
    flow: center
    inputs:
      n: {type: integer}
    outputs: [copy]
    steps:
      - id: pad
        uses: echo
        with: {text: "{{ 'a' | center(inputs.n) }}"}
"""

PERCENT = """
    flow: percent
    inputs:
      n: {type: integer}
    outputs: [copy]
    steps:
      - id: fmt
        uses: echo
        with: {text: "{{ '%*d' % (inputs.n, 1) }}"}
"""

LOOPS = """
    flow: loops
    inputs:
      n: {type: integer}
    outputs: [copy]
    steps:
      - id: spin
        uses: echo
        with:
          text: "{% for i in range(inputs.n) %}{% for j in range(inputs.n) %}{% endfor %}{% endfor %}done"
"""

RECURSE = """
    flow: recurse
    inputs:
      n: {type: integer}
    outputs: [copy]
    steps:
      - id: deep
        uses: echo
        with: {text: "{% macro m(k) %}{{ m(k + inputs.n) }}{% endmacro %}{{ m(0) }}"}
"""

ROUTE = """
    flow: route
    inputs:
      n: {type: integer}
    outputs: [copy]
    steps:
      - id: pick
        router:
          routes:
            - {expr: "10 ** (10 ** inputs.n) > 5", goto: big}
          default: big
      - id: big
        uses: echo
        with: {text: big}
"""

FLOWS = {
    "blocks/echo.yaml": ECHO,
    "flows/shout.yaml": SHOUT,
    "flows/center.yaml": CENTER,
    "flows/percent.yaml": PERCENT,
    "flows/loops.yaml": LOOPS,
    "flows/recurse.yaml": RECURSE,
    "flows/route.yaml": ROUTE,
}


@pytest.fixture
def limits_yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FLOWS)


def _failed(cli: Cli, yard: Path, flow: str, n: int) -> dict[str, Any]:
    began = time.monotonic()
    done = cli(yard, "run", flow, "--input", f"n={n}", "--json")
    assert time.monotonic() - began < 10.0
    assert done.code == 1, done.err
    last = done.events()[-1]
    assert last["type"] == "run_failed" and last["data"]["status"] == "failed"
    return last


@pytest.mark.parametrize(
    ("flow", "n", "step", "error"),
    [
        (
            "shout",
            10**8,
            "shout",
            "input 'text': repeated string exceeds the 1,000,000-character limit "
            "(limits.template_max_string in blockyard.yaml)",
        ),
        (
            "center",
            10**9,
            "pad",
            "input 'text': centered string exceeds the 1,000,000-character limit "
            "(limits.template_max_string in blockyard.yaml)",
        ),
        (
            "percent",
            10**9,
            "fmt",
            "input 'text': format width exceeds the 1,000,000-character limit "
            "(limits.template_max_string in blockyard.yaml)",
        ),
        (
            "loops",
            100_000,
            "spin",
            "input 'text': template does more than 1,000,000 loop iterations and calls "
            "(limits.template_max_iterations in blockyard.yaml)",
        ),
        (
            "route",
            9,
            "pick",
            "power exceeds the 64-bit limit (limits.template_max_int_bits in blockyard.yaml)",
        ),
    ],
)
def test_a_template_over_a_limit_fails_its_step(
    limits_yard: Path, cli: Cli, flow: str, n: int, step: str, error: str
) -> None:
    last = _failed(cli, limits_yard, flow, n)
    assert last["step"] == step
    assert error in str(last["data"]["error"])
    assert stored_bytes(limits_yard) < 5_000_000  # nothing huge was stored


def test_recursion_without_end_fails_its_step(limits_yard: Path, cli: Cli) -> None:
    last = _failed(cli, limits_yard, "recurse", 1)
    assert last["step"] == "deep"
    assert "recurses too deeply" in str(last["data"]["error"])


def test_runs_show_explains_the_limit(limits_yard: Path, cli: Cli) -> None:
    run_id = _failed(cli, limits_yard, "shout", 10**8)["run_id"]
    shown = json.loads(cli(limits_yard, "runs", "show", str(run_id), "--json").out)["run"]
    assert shown["status"] == "failed" and shown["error_step"] == "shout"
    assert "limits.template_max_string in blockyard.yaml" in shown["error"]
    text = cli(limits_yard, "runs", "show", str(run_id)).out
    assert "shout" in text and "1,000,000-character limit" in text


def test_limits_of_blockyard_yaml_are_honoured(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    yard = make_yard(
        {
            **FLOWS,
            "blockyard.yaml": """
        limits:
          template_max_string: 50
    """,
        }
    )
    done = cli(yard, "run", "shout", "--input", "n=50", "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == {"copy": "a" * 50}
    last = _failed(cli, yard, "shout", 51)
    assert "exceeds the 50-character limit (limits.template_max_string in blockyard.yaml)" in str(
        last["data"]["error"]
    )
