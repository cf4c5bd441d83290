"""What runs spent, on the command line: the TOKENS and COST columns of `blockyard runs`, the per-step
usage of `runs show`, and `blockyard stats` over versions, failures and prices nobody knows — each
number checked against the model_call events the runs recorded (real runs: the mock model with a
stated price, and a loopback OpenAI server whose price is unknown)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core.usage import Spend, money
from tests.runtime.conftest import subprocess_env
from tests.support.cli import Outcome
from tests.support.openai_stub import OpenAIStub, Reply
from tests.support.priced_yard import EXPLODE, FRAGILE, GREET, PRICED_MOCK, TOOLS, TOOLS_CONFIG

Cli = Callable[..., Outcome]


GREET_STUBBED = """
block: greet_stubbed
kind: llm
model: stubbed
inputs: {name: {type: string}}
outputs: {greeting: {type: string}}
prompt: {user: "Greet {{ name }}."}
"""
SHOUT = """
block: shout
kind: transform
inputs: {text: {type: string}}
outputs: {loud: {type: string}}
compute: {loud: "text | upper"}
"""
HELLO = """
flow: hello
version: {version}
inputs: {{name: {{type: string, default: World}}}}
outputs: [greeting, loud]
steps:
  - {{id: greet, uses: greet, with: {{name: "{{{{ inputs.name }}}}"}}}}
  - {{id: shout, uses: shout, with: {{text: "{{{{ context.greeting }}}}"}}}}
"""
BATCH = """
flow: batch
inputs: {names: {type: array, items: {type: string}}}
outputs: [greetings]
steps:
  - id: each
    map: {items: inputs.names, as: name, uses: greet, with: {name: "{{ name }}"}, collect: greetings}
"""
AWAY = """
flow: away
outputs: [greeting]
steps:
  - {id: greet, uses: greet_stubbed, with: {name: Ada}}
"""
PLAIN = """
flow: plain
inputs: {text: {type: string, default: hi}}
outputs: [loud]
steps:
  - {id: shout, uses: shout, with: {text: "{{ inputs.text }}"}}
"""


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path], stub: OpenAIStub) -> Path:
    config = (
        f"models:\n  default: {PRICED_MOCK}\n"
        f"  stubbed: {{provider: openai, name: m, base_url: '{stub.base_url}', api_key_env: STUB_KEY}}\n"
        + TOOLS_CONFIG
    )
    return make_yard(
        {
            "blockyard.yaml": config,
            "yardtools.py": TOOLS,
            "blocks/greet.yaml": GREET,
            "blocks/greet_stubbed.yaml": GREET_STUBBED,
            "blocks/shout.yaml": SHOUT,
            "blocks/explode.yaml": EXPLODE,
            "flows/hello.yaml": HELLO.format(version=1),
            "flows/fragile.yaml": FRAGILE,
            "flows/batch.yaml": BATCH,
            "flows/away.yaml": AWAY,
            "flows/plain.yaml": PLAIN,
        }
    )


def calls(cli: Cli, yard: Path, run_id: str) -> list[dict[str, Any]]:
    """The data of the run's model_call events, as `runs show --json` gives its trace."""
    body = json.loads(cli(yard, "runs", "show", run_id, "--json").out)
    return [
        event["data"] | {"step": event["step"]}
        for event in body["events"]
        if event["type"] == "model_call"
    ]


def spend_of(events: list[dict[str, Any]]) -> Spend:
    spend = Spend()
    for data in events:
        spend.add(data)
    return spend


def test_runs_lists_tokens_and_cost_and_an_unknown_price_as_unknown(
    yard: Path, cli: Cli, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    stub.queue(Reply.structured_output({"greeting": "hello from afar"}))
    assert cli(yard, "run", "hello", "--run-id", "priced").code == 0
    assert cli(yard, "run", "away", "--run-id", "unpriced").code == 0
    assert cli(yard, "run", "plain", "--run-id", "no-calls").code == 0
    lines = cli(yard, "runs").out.splitlines()
    assert lines[0].split() == [
        "ID",
        "FLOW",
        "STATUS",
        "STARTED",
        "DURATION",
        "TOKENS",
        "COST",
        "DETAIL",
    ]
    rows = {line.split()[0]: line for line in lines[1:]}

    priced = spend_of(calls(cli, yard, "priced"))
    assert priced.model_calls == 1 and priced.unpriced_calls == 0 and priced.cost_usd > 0
    # $1000 / $2000 per million tokens: the cost is the event's tokens at that price, shown by `money`
    assert priced.cost_usd == pytest.approx(
        (priced.input_tokens * 1000 + priced.output_tokens * 2000) / 1e6
    )
    assert rows["priced"].split()[7:9] == [str(priced.tokens), money(priced.cost_usd)]

    away = calls(cli, yard, "unpriced")
    assert [(c["provider"], c["cost_usd"], c["price_source"]) for c in away] == [
        ("openai", None, None)
    ]
    assert rows["unpriced"].split()[7:9] == [str(spend_of(away).tokens), "unknown"]  # never $0
    assert rows["no-calls"].split()[7:9] == ["-", "-"]


def test_runs_show_sums_model_calls_per_step_and_over_map_items(yard: Path, cli: Cli) -> None:
    assert cli(yard, "run", "hello", "--run-id", "h").code == 0
    assert (
        cli(yard, "run", "batch", "--input", 'names=["Ada", "Bo", "Cy"]', "--run-id", "b").code == 0
    )

    hello = calls(cli, yard, "h")
    total = spend_of(hello)
    shown = cli(yard, "runs", "show", "h").out
    assert (
        f"usage     1 model call, {total.input_tokens:,} in / {total.output_tokens:,} out tokens, "
        f"cost {money(total.cost_usd)}"
    ) in shown
    greet_line = next(line for line in shown.splitlines() if line.startswith("  greet "))
    assert (
        f"1 call  {total.input_tokens} in / {total.output_tokens} out  {money(total.cost_usd)}"
        in greet_line
    )
    shout_line = next(line for line in shown.splitlines() if line.startswith("  shout "))
    assert "call" not in shout_line and "$" not in shout_line

    body = json.loads(cli(yard, "runs", "show", "h", "--json").out)
    assert body["usage"] == {
        **total.as_dict(),
        "tokens": total.tokens,
        "cost": money(total.cost_usd),
    }
    steps = {entry["step"]: entry for entry in body["steps"]}
    assert steps["greet"]["usage"]["model_calls"] == 1 and steps["greet"]["items"] == 0
    assert steps["greet"]["usage"]["input_tokens"] == total.input_tokens
    assert steps["shout"]["usage"]["model_calls"] == 0 and steps["shout"]["usage"]["cost"] == "-"
    assert body["outside_steps"] is None

    batch = calls(cli, yard, "b")
    assert len(batch) == 3 and sorted(c["index"] for c in batch) == [0, 1, 2]
    items = spend_of(batch)
    each = json.loads(cli(yard, "runs", "show", "b", "--json").out)["steps"]
    entry = next(e for e in each if e["step"] == batch[0]["step"])
    assert (entry["usage"]["model_calls"], entry["items"]) == (3, 3)
    assert entry["usage"]["input_tokens"] == items.input_tokens
    assert entry["usage"]["cost_usd"] == pytest.approx(items.cost_usd)
    line = next(
        line
        for line in cli(yard, "runs", "show", "b").out.splitlines()
        if line.startswith(f"  {batch[0]['step']} ")
    )
    assert "3 calls" in line and "over 3 items" in line


def test_stats_per_version_with_failures_and_unpriced_runs(
    yard: Path, cli: Cli, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_KEY", "sk-test")
    for run_id in ("v1-a", "v1-b"):
        assert cli(yard, "run", "hello", "--run-id", run_id).code == 0
    (yard / "flows" / "hello.yaml").write_text(HELLO.format(version=2), encoding="utf-8")
    assert (
        cli(
            yard,
            "run",
            "hello",
            "--input",
            "name=Someone with a much longer name",
            "--run-id",
            "v2",
        ).code
        == 0
    )
    assert cli(yard, "run", "fragile", "--run-id", "broken").code == 1
    stub.queue(Reply.structured_output({"greeting": "hi"}))
    assert cli(yard, "run", "away", "--run-id", "far").code == 0

    report = json.loads(cli(yard, "stats", "--json").out)
    assert report["window"] == "7d" and report["flow"] is None
    versions = {(row["flow"], row["version"]): row for row in report["versions"]}
    assert sorted(versions) == [("away", 1), ("fragile", 1), ("hello", 1), ("hello", 2)]

    v1 = [spend_of(calls(cli, yard, run_id)) for run_id in ("v1-a", "v1-b")]
    v2 = spend_of(calls(cli, yard, "v2"))
    row1, row2 = versions[("hello", 1)], versions[("hello", 2)]
    assert (row1["runs"], row1["finished"], row1["failed"], row1["failure_rate"]) == (2, 2, 0, 0.0)
    assert row1["cost_usd"] == pytest.approx(sum(s.cost_usd for s in v1))
    assert row1["mean_cost_usd"] == pytest.approx(sum(s.cost_usd for s in v1) / 2)
    assert row1["mean_tokens"] == pytest.approx(sum(s.tokens for s in v1) / 2, abs=0.05)
    assert row1["usage"]["model_calls"] == 2 and row1["unpriced_runs"] == 0
    # "did v2 get dearer?": its longer prompt costs more per run, and the answer is in the rows
    assert (
        row2["mean_cost_usd"] == pytest.approx(v2.cost_usd)
        and row2["mean_cost_usd"] > row1["mean_cost_usd"]
    )
    assert row1["duration_p50_s"] is not None and row1["duration_p50_s"] <= row1["duration_p95_s"]

    broken = versions[("fragile", 1)]
    assert (broken["runs"], broken["failed"], broken["failure_rate"]) == (1, 1, 1.0)
    # a failed run's calls cost too
    assert broken["usage"]["model_calls"] == 1 and broken["cost_usd"] > 0

    far = versions[("away", 1)]
    assert (far["cost_usd"], far["mean_cost_usd"], far["unpriced_runs"]) == (None, None, 1)
    assert (far["cost"], far["mean_cost"]) == ("unknown", "unknown")

    flows = {row["flow"]: row for row in report["flows"]}
    assert flows["hello"]["version"] is None and flows["hello"]["runs"] == 3
    assert flows["hello"]["cost_usd"] == pytest.approx(row1["cost_usd"] + row2["cost_usd"])

    text = cli(yard, "stats").out.splitlines()
    assert text[0].startswith("runs since ") and text[0].endswith("(7d)")
    assert text[1].split() == [
        "FLOW",
        "VERSION",
        "RUNS",
        "FAILED",
        "P50",
        "P95",
        "TOKENS/RUN",
        "COST/RUN",
        "TOTAL",
        "COST",
    ]
    cells = {tuple(line.split()[:2]): line.split() for line in text[2:]}
    assert cells[("hello", "1")][2:4] == ["2", "0"] and cells[("hello", "all")][2] == "3"
    assert cells[("hello", "1")][-1] == money(row1["cost_usd"])
    assert cells[("fragile", "1")][3:5] == ["1", "(100%)"]
    assert cells[("away", "1")][-2:] == ["unknown", "unknown"]
    assert [key for key in cells if key[0] == "hello"] == [
        ("hello", "1"),
        ("hello", "2"),
        ("hello", "all"),
    ]

    only = json.loads(cli(yard, "stats", "hello", "--json").out)
    assert [row["version"] for row in only["versions"]] == [1, 2] and only["flow"] == "hello"


def test_stats_mixes_priced_and_unpriced_runs_as_a_lower_bound(
    yard: Path, cli: Cli, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One flow version whose runs went to an unpriced and then a priced model: its total is a lower bound
    that says so (a call whose tokens were not reported has no price either, whatever the profile says)."""
    monkeypatch.setenv("STUB_KEY", "sk-test")
    # nothing queued: the stub answers 400
    assert cli(yard, "run", "away", "--run-id", "refused").code == 1
    stub.queue(Reply.structured_output({"greeting": "hi"}))
    assert cli(yard, "run", "away", "--run-id", "unknown").code == 0
    block = yard / "blocks" / "greet_stubbed.yaml"  # the same flow version, now on the priced mock
    block.write_text(
        block.read_text(encoding="utf-8").replace("model: stubbed", "model: default"),
        encoding="utf-8",
    )
    assert cli(yard, "run", "away", "--run-id", "priced").code == 0
    row = json.loads(cli(yard, "stats", "away", "--json").out)["versions"][0]
    known = spend_of(calls(cli, yard, "priced")).cost_usd
    assert known > 0 and row["cost_usd"] == pytest.approx(known)
    assert row["unpriced_runs"] == 2  # the failed call had no price either
    assert row["cost"] == f">= {money(known)} (2 runs unpriced)"
    assert row["mean_cost"] == f">= {money(known / 3)}"


def test_stats_window_and_usage_errors(yard: Path, cli: Cli) -> None:
    assert cli(yard, "stats").out.endswith("no runs in this window\n")
    assert cli(yard, "run", "hello").code == 0
    assert "hello" in cli(yard, "stats", "--since", "1h").out
    assert cli(yard, "stats", "--since", "2999-01-01").out.endswith("no runs in this window\n")
    assert (
        json.loads(cli(yard, "stats", "--since", "2020-01-01T00:00", "--json").out)["versions"][0][
            "runs"
        ]
        == 1
    )
    bad = cli(yard, "stats", "--since", "last week")
    assert bad.code == 2 and bad.err.startswith(
        "error: since 'last week': not a duration such as 7d"
    )
    assert (
        cli(yard, "stats", "--since", "99999d").err.strip()
        == "error: since '99999d': longer than ten years"
    )
    assert cli(yard, "stats", "nothing").out.endswith("no runs in this window\n")


def test_stats_imports_no_langgraph(yard: Path, cli: Cli) -> None:
    assert cli(yard, "run", "hello", "--run-id", "r1").code == 0
    probe = (
        "import sys\nfrom engine.cli import main\n"
        f"main(['stats', '--root', {str(yard)!r}])\nmain(['runs', '--root', {str(yard)!r}])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'langchain', 'openai', 'fastapi'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "hello" in done.stdout and done.stdout.strip().splitlines()[-1] == "[]"
