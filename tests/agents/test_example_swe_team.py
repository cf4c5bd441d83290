"""The software-team example of the repository's yard (flows/swe_team.yaml, docs/examples.md):
its graph, the one-command run writing output/, and the same flow against a real OpenAI-compatible
server on 127.0.0.1, through the real langchain-openai client: the prompts of prompts/*.md go over
the wire, the structured outputs parse, and write_file calls land files in the output folder.
(Its four flow tests are flows/swe_team.test.yaml, run by tests/test_flowtests.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import Cli
from tests.support.example import copy_example_yard
from tests.support.openai_stub import OpenAIStub, RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[2]
PROMPT = "Build an MVP for a todo-list app"


def copy_yard(dest: Path) -> Path:
    return copy_example_yard(dest)


def test_the_graph_draws_the_fan_out_and_the_bounded_back_edge(repo_root: Path, cli: Cli) -> None:
    done = cli(repo_root, "graph", "swe_team", "--format", "json")
    assert done.code == 0, done.err
    edges = json.loads(done.out)["edges"]
    fan_out = [(e["source"], e["target"]) for e in edges if e["kind"] == "fan-out"]
    back = [(e["source"], e["target"], e["bound"]) for e in edges if e["kind"] == "loop-back"]
    assert fan_out == [("workers", "write")]
    assert back == [("build__check", "workers", 15)]


def test_one_command_writes_the_app_into_output(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_yard(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    done = cli(root, "run", "swe_team", "--input", f"prompt={PROMPT}", "--json")
    assert done.code == 0, done.err
    events = done.events()
    assert (
        events[-1]["type"] == "run_finished" and events[-1]["data"]["outputs"]["verdict"] == "pass"
    )
    written = [
        (e["data"]["path"], e["data"].get("index")) for e in events if e["type"] == "file_written"
    ]
    assert sorted(written[:3]) == [
        ("app.js", 2),
        ("index.html", 0),
        ("style.css", 1),
    ]  # one engineer per file
    assert written[3:] == [("app.js", 0)]  # the second pass: the one file QA sent back
    assert sorted(p.name for p in (root / "output").iterdir()) == [
        "app.js",
        "index.html",
        "style.css",
    ]
    # the latest
    assert "function deleteTodo(id)" in (root / "output" / "app.js").read_text(encoding="utf-8")
    shown = cli(root, "runs", "show", events[0]["run_id"])
    assert "written to output/" in shown.out and "app.js" in shown.out


# ---- over the wire ----------------------------------------------------------------------------

APP_V1 = "function addTodo(text) {}\nfunction render() { /* Delete calls deleteTodo(id) */ }\n"
APP_V2 = APP_V1 + "function deleteTodo(id) {}\n"


def _system(request: RecordedRequest) -> str:
    return next((str(m["content"]) for m in request.messages if m["role"] == "system"), "")


def _user(request: RecordedRequest) -> str:
    return next((str(m["content"]) for m in request.messages if m["role"] == "user"), "")


def _tool_results(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "tool"]


def _calls(*calls: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=[(name, json.dumps(args)) for name, args in calls])


def _team(request: RecordedRequest) -> Reply:
    """The team as a real model would play it, told apart by the system prompt each role is sent."""
    system, user = _system(request), _user(request)
    if "You are the **manager**" in system:
        return Reply.structured_output({"kind": "software", "plan": "A todo list in one page."})
    if "You are the **architect**" in system:
        tasks = [
            {"path": path, "contract": f"{path} as designed"}
            for path in ("index.html", "style.css", "app.js")
        ]
        return Reply.structured_output(
            {
                "design": "index.html, style.css, app.js; app.js defines deleteTodo(id).",
                "tasks": tasks,
            }
        )
    if "You are a **software engineer**" in system:
        path = user.split("File: ", 1)[1].split("\n", 1)[0].strip()
        if _tool_results(request):
            return _calls(("final_answer", {"written": {path: f"{path}, written over the wire"}}))
        content = (
            (APP_V2 if "Fix instructions" in user else APP_V1)
            if path == "app.js"
            else f"<!-- {path} -->\n"
        )
        return _calls(("write_file", {"path": path, "content": content}))
    if "You are **QA**" in system:
        read = _tool_results(request)
        if not read:
            return _calls(
                *[("read_file", {"path": p}) for p in ("index.html", "style.css", "app.js")]
            )
        if any("function deleteTodo" in text for text in read):
            return _calls(
                ("final_answer", {"verdict": "pass", "findings": ["All good."], "fixes": []})
            )
        return _calls(
            (
                "final_answer",
                {
                    "verdict": "fix",
                    "findings": ["deleteTodo is missing."],
                    "fixes": [{"path": "app.js", "instructions": "Add deleteTodo(id)."}],
                },
            )
        )
    return Reply.error_reply(400, f"unexpected request: {system[:80]!r}")


def test_the_team_over_a_real_openai_compatible_server(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_yard(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub() as stub:
        stub.default = Reply.dynamic(_team)
        config = yaml.safe_load((root / "blockyard.yaml").read_text(encoding="utf-8"))
        config["models"]["swe_demo"] = {
            "provider": "openai",
            "name": "team-model",
            "base_url": stub.base_url,
        }
        (root / "blockyard.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        done = cli(root, "run", "swe_team", "--input", f"prompt={PROMPT}", "--json")
        requests = list(stub.requests)
    assert done.code == 0, done.out + done.err
    outputs = done.events()[-1]["data"]["outputs"]
    # the structured outputs parsed: the manager's and architect's answers, QA's two verdicts, accumulated
    assert outputs["plan"] == "A todo list in one page." and outputs["verdict"] == "pass"
    assert outputs["reviews"] == ["deleteTodo is missing.", "All good."]
    assert outputs["files"] == {
        p: f"{p}, written over the wire" for p in ("index.html", "style.css", "app.js")
    }
    # the prompts of prompts/*.md were sent, includes resolved
    team = (root / "prompts" / "team.md").read_text(encoding="utf-8").strip()
    for role, marker in (
        ("manager", "You are the **manager**"),
        ("architect", "You are the **architect**"),
        ("swe_worker", "You are a **software engineer**"),
        ("qa", "You are **QA**"),
    ):
        text = (root / "prompts" / f"{role}.md").read_text(encoding="utf-8")
        own = text.split("%}", 1)[1].strip()  # the role's own text, after the include of team.md
        sent = [_system(r) for r in requests if marker in _system(r)]
        assert sent and all(team in s and own in s for s in sent), role
    assert f"Request: {PROMPT}" in _user(requests[0])
    # write_file went over the wire, and what it wrote is where the flow says: output/
    offered = [[t["function"]["name"] for t in r.body.get("tools", [])] for r in requests]
    assert ["write_file", "final_answer"] in offered
    assert (root / "output" / "app.js").read_text(encoding="utf-8") == APP_V2
    assert (root / "output" / "index.html").read_text(encoding="utf-8") == "<!-- index.html -->\n"
    # QA was sent the files it read: the first review saw app.js without deleteTodo, the second with it
    reviews = [r for r in requests if "You are **QA**" in _system(r) and _tool_results(r)]
    assert [any("function deleteTodo" in t for t in _tool_results(r)) for r in reviews] == [
        False,
        True,
    ]
