"""`blockyard eval` running evals: the example yard offline with its reports, the response cache between
runs, the history per flow version, judges through a model profile with their reasoning in every report,
runs that fail or wait, and the progress bar on a terminal (docs/evals.md)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.evals.eval_kit import HELLO, config, env, user_text
from tests.review.yardgit import GREET, SHOUT
from tests.support.cli import Cli
from tests.support.example import copy_example_yard
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply

Maker = Callable[[dict[str, str]], Path]
MOCK = "models:\n  default: {provider: mock}\n"
SHOUT_EVAL = """\
eval: shouting
block: shout
cases:
  - {name: hi, inputs: {text: hi}, assert: [{equals: HI, output: loud}]}
  - {name: ada, inputs: {text: Ada}, assert: [{equals: ADA, output: loud}]}
"""


def as_json(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    return data


def test_the_example_yard_passes_offline_and_writes_junit_and_markdown(
    cli: Cli, tmp_path: Path
) -> None:
    root = copy_example_yard(tmp_path / "yard")
    junit, markdown = tmp_path / "evals.xml", tmp_path / "evals.md"
    done = cli(root, "eval", "--junit", str(junit), "--markdown", str(markdown))
    assert done.code == 0, done.out + done.err
    assert done.err.startswith("note: no model configured: using the offline mock model")
    # not a terminal: one line per eval as it ends, with the cases of all evals done by then. The evals'
    # cases run at once (-j), so which eval ends first, and how many cases the others have done by
    # then, varies from run to run: the counts only grow, and the last is the whole
    ended = [
        re.fullmatch(r"eval (\w+): done \((\d+)/11 cases\)", line)
        for line in done.err.splitlines()[1:]
    ]
    assert all(ended), done.err
    names = [match.group(1) for match in ended if match]
    counts = [int(match.group(2)) for match in ended if match]
    assert sorted(names) == ["hello", "shout", "support_chat", "triage"]
    assert counts == sorted(counts) and counts[-1] == 11 and counts[0] >= 1
    table = done.out.splitlines()
    assert [line.split("  ")[0] for line in table if line.startswith("eval ")] == [
        "eval hello",
        "eval shout",
        "eval support_chat",
        "eval triage",
    ]
    assert "  4/4 passed (100%) · mean score 1.00 · cost $0 (judges $0) · mean latency " in done.out
    assert (
        "      judge 'A warm one-line greeting addressed to \"Ada\".': mock judge: the answer contains 1 of the 1 "
        'terms the rubric quotes ("Ada").' in table
    )
    assert table[-2] == "4 evals, 11/11 cases passed, cost $0 · ok"
    assert table[-1].startswith(
        "cache: 0 of 15 model calls answered from the cache; 11 replies kept in "
        ".blockyard/cache/models · "
    )  # the scripted support chat's 4 are never kept
    suites = ET.parse(junit).getroot()
    assert (suites.tag, suites.get("tests"), suites.get("failures")) == ("testsuites", "11", "0")
    assert {suite.get("name"): suite.get("tests") for suite in suites} == {
        "hello": "4",
        "shout": "2",
        "triage": "3",
        "support_chat": "2",
    }
    names = [case.get("name") for case in suites.iter("testcase")]
    assert names[:4] == [
        "evals/data/people.csv:2",
        "evals/data/people.csv:3",
        "Ada",
        "nobody in particular",
    ]
    text = markdown.read_text(encoding="utf-8")
    assert text.startswith(
        "## Blockyard evals\n\n| eval | target | cases | pass rate | mean score | cost | "
        "mean latency | result |\n"
    )
    assert "| hello | flow `hello` | 4 | 100% | 1.00 | $0 |" in text
    assert "| shout | block `shout` | 2 | 100% | 1.00 | - |" in text
    assert (
        "| hello | head | Ada | judge 'A warm one-line greeting addressed to \"Ada\".' | 1.00 | mock judge: "
        in text
    )


def test_a_rerun_makes_no_call_and_no_cache_asks_again(
    cli: Cli, make_yard: Maker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_yard(
        {
            "blockyard.yaml": MOCK,
            "blocks/greet.yaml": GREET,
            "blocks/shout.yaml": SHOUT,
            "flows/hello.yaml": HELLO,
            "evals/hello.yaml": "eval: hello\nflow: hello\ncases: [{inputs: {name: Ada}}, "
            "{inputs: {name: Bo}}]\n",
        }
    )
    first = as_json(cli(root, "eval", "--json").out)
    again = as_json(cli(root, "eval", "--json").out)
    assert first["cache"] == {
        "hits": 0,
        "misses": 2,
        "writes": 2,
        "errors": 0,
        "folder": ".blockyard/cache/models",
        "cached_calls": 0,
        "model_calls": 2,
        "saved_usd": 0.0,
    }
    assert again["cache"] == {
        **first["cache"],
        "hits": 2,
        "misses": 0,
        "writes": 0,
        "cached_calls": 2,
    }
    assert [case["outputs"] for case in again["evals"][0]["results"]] == [
        case["outputs"] for case in first["evals"][0]["results"]
    ]
    off = as_json(cli(root, "eval", "--json", "--no-cache").out)
    assert off["cache"] is None and off["evals"][0]["model_calls"] == 2
    moved = tmp_path / "ci-cache"
    assert (
        as_json(cli(root, "eval", "--json", "--cache-dir", str(moved)).out)["cache"]["writes"] == 2
    )
    monkeypatch.setenv("BLOCKYARD_EVAL_CACHE", str(moved))
    assert as_json(cli(root, "eval", "--json").out)["cache"]["hits"] == 2
    assert len(list(moved.rglob("*.json"))) == 2


def test_history_shows_how_results_moved_across_flow_versions(cli: Cli, make_yard: Maker) -> None:
    root = make_yard(
        {"blockyard.yaml": MOCK, "blocks/shout.yaml": SHOUT, "evals/shouting.yaml": SHOUT_EVAL}
    )
    assert cli(root, "eval").code == 0
    assert cli(root, "eval").code == 0
    (root / "blocks" / "shout.yaml").write_text(
        SHOUT.replace("text | upper", "text | lower"), encoding="utf-8"
    )
    failed = cli(root, "eval", "shouting")
    assert failed.code == 1
    assert (
        "      equals 'HI' (loud): output 'loud' is \"hi\", expected \"HI\""
        in failed.out.splitlines()
    )
    shown = cli(root, "eval", "--history", "shouting")
    assert shown.code == 0
    lines = shown.out.splitlines()
    assert lines[0] == "eval shouting  block shout · 2 versions, oldest first"
    assert lines[1].split() == [
        "version",
        "first",
        "run",
        "runs",
        "revision",
        "cases",
        "pass",
        "rate",
        "mean",
        "score",
        "cost",
        "latency",
    ]
    assert len(lines) == 4
    assert "  2     working tree  2/2   " in lines[2] and "  100%  " in lines[2]
    assert (
        "  0/2   " in lines[3]
        and "  100% → 0% (-100 pts)  " in lines[3]
        and "  1.00 → 0.00 (-1.00)  " in lines[3]
    )
    data = as_json(cli(root, "eval", "--history", "shouting", "--json").out)
    assert [
        (version["runs"], version["passed"], version["pass_rate"]) for version in data["versions"]
    ] == [(2, 2, 1.0), (1, 0, 0.0)]
    assert len({version["digest"] for version in data["versions"]}) == 2
    assert (
        cli(root, "eval", "--history", "nothing").out
        == "eval nothing: no results kept yet (run `blockyard eval "
        "nothing`)\n"
    )


JUDGED = """\
eval: judged
flow: hello
assert:
  - judge: {rubric: "A warm greeting that names the person.", model: judge, threshold: 0.5}
cases:
  - {name: ada, inputs: {name: Ada}}
  - {name: bo, inputs: {name: Bo}}
"""


def judging(request: RecordedRequest) -> Reply:
    """The greeting model greets Bo coldly; the judge model scores what it is sent, with its reasons."""
    if request.forced_tool == "judge":
        answer = user_text(request).rpartition("Answer:\n")[2]
        if "Ada" in answer:
            return Reply(structured={"reasoning": "Warm, and it names Ada.", "score": 0.9})
        return Reply(structured={"reasoning": "Curt: it never names the person.", "score": 0.2})
    name = user_text(request).removeprefix("Greet ").removesuffix(".")
    return Reply(structured={"greeting": f"Hello dear {name}!" if name == "Ada" else "Hm."})


def test_a_judge_scores_through_its_model_profile_with_its_reasoning_in_every_report(
    cli: Cli, make_yard: Maker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env().items():
        if key.startswith("EVAL_STUB"):
            monkeypatch.setenv(key, value)
    with OpenAIStub() as stub:
        stub.default = Reply.dynamic(judging)
        root = make_yard(
            {
                "blockyard.yaml": config(stub.base_url, judge=True),
                "blocks/greet.yaml": GREET,
                "blocks/shout.yaml": SHOUT,
                "flows/hello.yaml": HELLO,
                "evals/judged.yaml": JUDGED,
            }
        )
        junit, markdown = tmp_path / "j.xml", tmp_path / "m.md"
        done = cli(root, "eval", "--junit", str(junit), "--markdown", str(markdown))
        judges = [request for request in stub.requests if request.forced_tool == "judge"]
        assert [request.body["model"] for request in judges] == ["judge-model", "judge-model"]
        assert judges[0].messages[0]["content"].startswith("You are an impartial evaluator.")
        assert "Rubric:\nA warm greeting that names the person." in user_text(judges[0])
        data = as_json(cli(root, "eval", "--json").out)  # from the cache: the same verdicts
        assert len(stub.requests) == 4
    assert done.code == 1
    lines = done.out.splitlines()
    assert (
        "      judge 'A warm greeting that names the person.': the judge scored 0.20, below its threshold "
        "0.50" in lines
    )
    assert (
        "      judge 'A warm greeting that names the person.': Curt: it never names the person."
        in lines
    )
    assert "      judge 'A warm greeting that names the person.': Warm, and it names Ada." in lines
    assert "  assertions: judge 'A warm greeting that names the person.' 1/2 (mean 0.55)" in lines
    checks = {case["case"]: case["checks"][0] for case in data["evals"][0]["results"]}
    assert checks == {
        "ada": {
            "kind": "judge",
            "label": "judge 'A warm greeting that names the person.'",
            "passed": True,
            "score": 0.9,
            "reasoning": "Warm, and it names Ada.",
        },
        "bo": {
            "kind": "judge",
            "label": "judge 'A warm greeting that names the person.'",
            "passed": False,
            "score": 0.2,
            "message": "the judge scored 0.20, below its threshold 0.50",
            "reasoning": "Curt: it never names the person.",
        },
    }
    result = data["evals"][0]
    assert (result["mean_score"], result["cost_usd"], result["judge_cost_usd"]) == (
        0.55,
        4e-05,
        0.00012,
    )
    text = markdown.read_text(encoding="utf-8")
    assert (
        "| judged | head | bo | judge 'A warm greeting that names the person.' | 0.20 | Curt: it never names the "
        "person. |" in text
    )
    outs = {
        case.get("name"): case.findtext("system-out")
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    assert "judge 'A warm greeting that names the person.': Warm, and it names Ada." in str(
        outs["ada"]
    )


FAILING = """\
block: divide
kind: transform
inputs:
  n: {type: integer}
outputs:
  half: {type: number}
compute:
  half: "n / 0"
"""

GATED = """\
flow: gated
outputs: [loud]
steps:
  - id: ok
    approval: {message: Go on?}
  - id: shout
    uses: shout
    with: {text: go}
"""


def test_a_run_that_fails_or_waits_fails_its_case_with_why(cli: Cli, make_yard: Maker) -> None:
    root = make_yard(
        {
            "blockyard.yaml": MOCK,
            "blocks/divide.yaml": FAILING,
            "blocks/shout.yaml": SHOUT,
            "flows/gated.yaml": GATED,
            "evals/divide.yaml": "eval: divide\nblock: divide\ncases: [{inputs: {n: 1}}]\n",
            "evals/gated.yaml": "eval: gated\nflow: gated\ncases: [{name: waits}]\n",
        }
    )
    data = as_json(cli(root, "eval", "--json").out)
    results = {result["eval"]: result["results"][0] for result in data["evals"]}
    assert (
        results["divide"]["status"],
        results["divide"]["passed"],
        results["divide"]["score"],
    ) == ("failed", False, 0.0)
    assert "division by zero" in results["divide"]["error"]
    assert results["gated"]["status"] == "waiting"
    assert results["gated"]["error"] == (
        "the run waits at approval gate 'ok': an eval case must run to its end "
        "(evals decide no gates)"
    )
    assert data["exit_code"] == 1 and len(data["misses"]) == 2


def test_usage_errors_exit_2(cli: Cli, make_yard: Maker) -> None:
    root = make_yard(
        {"blockyard.yaml": MOCK, "blocks/shout.yaml": SHOUT, "evals/shouting.yaml": SHOUT_EVAL}
    )
    unknown = cli(root, "eval", "shoutin")
    assert (unknown.code, unknown.err) == (
        2,
        "error: unknown eval 'shoutin' (did you mean 'shouting'?); the evals: shouting\n",
    )
    assert cli(root, "eval", "--all").err == "error: --all goes with --base REV\n"
    assert cli(root, "eval", "--fail-on", "regression").err == (
        "error: --fail-on regression compares with a base: give --base REV\n"
    )
    assert cli(root, "eval", "--history", "x", "shouting").code == 2
    missing = root / "nowhere" / "evals.xml"
    assert (
        cli(root, "eval", "--junit", str(missing)).err
        == f"error: cannot write {missing}: no such folder "
        f"{missing.parent}\n"
    )


def test_the_progress_bar_is_drawn_on_a_terminal(make_yard: Maker) -> None:
    root = make_yard(
        {"blockyard.yaml": MOCK, "blocks/shout.yaml": SHOUT, "evals/shouting.yaml": SHOUT_EVAL}
    )
    leader, follower = pty.openpty()
    child_env = {**env(), "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "eval"],
        cwd=root,
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            piece = os.read(leader, 4096)
        except OSError:  # the child closed its side
            break
        if not piece:
            break
        drawn += piece
    out, _ = process.communicate(timeout=120)
    os.close(leader)
    assert process.returncode == 0, out
    text = drawn.decode("utf-8", "replace")
    assert "\r\x1b[K" in text and "2/2 cases" in text and "█" * 24 in text
    assert "eval shouting: done" not in text  # the bar replaces the lines of a log
    assert out.splitlines()[-2] == "1 eval, 2/2 cases passed, cost - · ok"
