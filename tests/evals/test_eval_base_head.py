"""`blockyard eval --base REV` in a real git repository of two commits — the second changes one block's
prompt — against a loopback OpenAI-compatible server scripted so that the new prompt fails one case: the
report names exactly that case pass→fail, shows the cost delta, runs only the flows that use the changed
block, exits 1 with `--fail-on regression`; run again, every call comes from the cache (docs/evals.md).
The CLI runs as a process of its own: the exit code is the point."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evals.eval_kit import (
    HELLO,
    HELLO_EVAL,
    RECAP,
    RECAP_EVAL,
    SECRET,
    SUMMARIZE,
    as_json,
    config,
    greeter,
    run_cli,
    user_text,
)
from tests.review.yardgit import GREET, SHOUT, commit, repo
from tests.support.openai_stub import OpenAIStub, Reply

WARMER = GREET.replace("Greet {{ name }}.", "Greet {{ name }} warmly.")


def two_commits(root: Path, base_url: str) -> Path:
    repo(
        root,
        {
            "blockyard.yaml": config(base_url),
            "blocks/greet.yaml": GREET,
            "blocks/summarize.yaml": SUMMARIZE,
            "blocks/shout.yaml": SHOUT,
            "flows/hello.yaml": HELLO,
            "flows/recap.yaml": RECAP,
            "evals/hello.yaml": HELLO_EVAL,
            "evals/recap.yaml": RECAP_EVAL,
            ".gitignore": ".blockyard/\n",
        },
    )
    commit(root, "warmer greetings", {"blocks/greet.yaml": WARMER})
    return root


@pytest.mark.timeout(600)
def test_base_against_head_names_the_case_that_broke_and_a_rerun_makes_no_call(
    tmp_path: Path,
) -> None:
    with OpenAIStub() as stub:
        stub.default = Reply.dynamic(greeter)
        root = two_commits(tmp_path / "repo", stub.base_url)
        markdown, junit = tmp_path / "evals.md", tmp_path / "evals.xml"
        done = run_cli(
            root,
            "eval",
            "--base",
            "HEAD~1",
            "--fail-on",
            "regression",
            "--markdown",
            str(markdown),
            "--junit",
            str(junit),
        )
        asked = [user_text(request) for request in stub.requests]
        again = run_cli(root, "eval", "--base", "HEAD~1", "--fail-on", "regression", "--json")
        assert len(stub.requests) == len(asked), "the second run asked the server"
        tolerant = run_cli(
            root,
            "eval",
            "--base",
            "HEAD~1",
            "--fail-on",
            "regression",
            "--tolerance",
            "0.5",
            "--json",
        )
        everything = run_cli(root, "eval", "--base", "HEAD~1", "--all", "--json")
        # --all: recap too, once (on both sides the same request)
        assert len(stub.requests) == len(asked) + 1
    assert done.code == 1, done.out + done.err
    # only hello uses the changed block: recap is not run on either side
    assert sorted(asked) == sorted(
        [
            "Greet Ada.",
            "Greet Bo.",
            "Greet Cy.",
            "Greet Ada warmly.",
            "Greet Bo warmly.",
            "Greet Cy warmly.",
        ]
    )
    lines = done.out.splitlines()
    base = next(line for line in lines if line.startswith("base "))
    assert base.startswith("base HEAD~1 (") and base.endswith(") → head working tree")
    rows = {
        line.split()[0]: line
        for line in lines
        if line.startswith("  ") and line.split()[0] in ("ada", "bo", "cy")
    }
    assert rows["bo"].split()[1:4] == ["pass", "FAIL", "pass→fail"]
    assert [rows[name].split()[1:4] for name in ("ada", "cy")] == [["pass", "pass", "pass"]] * 2
    assert "$0.000020 → $0.000024 (+$0.000004)" in rows["bo"]
    summary = next(line for line in lines if line.startswith("  pass rate "))
    assert summary.startswith(
        "  pass rate 100% → 66.7% (-33 pts) · mean score 1.00 → 0.67 (-0.33) · cost $0.000060 → "
        "$0.000072 (+$0.000012) · "
    )
    assert (
        "regression: pass rate fell from 100% to 66.7%; regression: mean score fell from 1.00 to 0.67"
        in summary
    )
    assert (
        "not run, unchanged between the revisions: recaps (flow recap) (--all runs them)" in lines
    )
    text = markdown.read_text(encoding="utf-8")
    assert (
        "| greetings | bo | ✅ pass → ❌ fail | 1.00 → 0.00 (-1.00) | $0.000020 → $0.000024 (+$0.000004) | names "
        "the person: expr 'inputs.name in outputs.greeting' is false;" in text
    )
    assert (
        "| greetings | ada |"
        not in text.partition("**Cases that changed**")[2].partition("Not run")[0]
    )
    assert (
        "| greetings | flow `hello` | 100% → 66.7% (-33 pts) | 1.00 → 0.67 (-0.33) | $0.000060 → $0.000072 "
        "(+$0.000012) |" in text
    )
    assert "Not run, unchanged between the revisions: `recaps` (flow recap)." in text
    assert '<testcase classname="greetings" name="bo"' in junit.read_text(encoding="utf-8")

    # again: the same report, every call from the cache (and the cache holds no key)
    assert again.code == 1, again.err
    data = as_json(again)
    assert data["cache"]["cached_calls"] == data["cache"]["model_calls"] == 6
    assert data["cache"]["saved_usd"] == pytest.approx(0.000132)
    (comparison,) = data["comparison"]
    assert [(case["case"], case["change"]) for case in comparison["cases"]] == [
        ("ada", "pass"),
        ("bo", "pass→fail"),
        ("cy", "pass"),
    ]
    assert comparison["cost_delta_usd"] == pytest.approx(0.000012)
    assert comparison["pass_rate_delta"] == -0.3333 and comparison["mean_score_delta"] == -0.3333
    assert data["unchanged"] == [{"eval": "recaps", "target": "flow recap"}]
    assert data["regressions"] == [
        {"eval": "greetings", "regression": "pass rate fell from 100% to 66.7%"},
        {"eval": "greetings", "regression": "mean score fell from 1.00 to 0.67"},
    ]
    kept = [
        path.read_bytes() for path in (root / ".blockyard" / "cache" / "models").rglob("*.json")
    ]
    assert len(kept) == 7 and not any(SECRET.encode() in entry for entry in kept)

    # a tolerance of 0.5 forgives the drop, but not the threshold the head misses
    assert as_json(tolerant)["regressions"] == [] and tolerant.code == 1
    assert [(result["eval"], result["side"]) for result in as_json(everything)["evals"]] == [
        ("greetings", "head"),
        ("recaps", "head"),
    ]
    assert as_json(everything)["unchanged"] == []


@pytest.mark.timeout(600)
def test_a_flow_new_since_the_base_runs_on_the_head_only(tmp_path: Path) -> None:
    with OpenAIStub() as stub:
        stub.default = Reply.dynamic(greeter)
        root = repo(
            tmp_path / "repo",
            {
                "blockyard.yaml": config(stub.base_url),
                "blocks/summarize.yaml": SUMMARIZE,
                "flows/recap.yaml": RECAP,
                "evals/recap.yaml": RECAP_EVAL,
            },
        )
        commit(
            root,
            "a greeting flow",
            {
                "blocks/greet.yaml": GREET,
                "blocks/shout.yaml": SHOUT,
                "flows/hello.yaml": HELLO,
                "evals/hello.yaml": HELLO_EVAL,
            },
        )
        done = run_cli(root, "eval", "--base", "HEAD~1", "--fail-on", "regression", "--json")
    assert done.code == 0, done.err
    data = as_json(done)
    (comparison,) = data["comparison"]
    assert (comparison["eval"], comparison["comparable"]) == ("greetings", False)
    assert [case["change"] for case in comparison["cases"]] == ["new", "new", "new"]
    assert (
        data["base_evals"][0]["problem"]
        == "flow 'hello' does not exist on the base side (HEAD~1 ("
        + data["base"].split("(")[1]
        + ")"
    )
    assert data["unchanged"] == [{"eval": "recaps", "target": "flow recap"}]
