"""`policy:` in blockyard.yaml: each rule's violation is a coded diagnostic at the offending line."""

from __future__ import annotations

from pathlib import Path

from engine.definitions.project import load_project
from engine.validate import semantic

POLICY = """\
models:
  default: {provider: openai, name: gpt-4o}
  small: {provider: openai, name: gpt-4o-mini-2024}
http:
  allowed_hosts: [api.example.com, evil.test]
policy:
  models: {providers: [mock, openai], names: ["gpt-4o-mini*"]}
  max_agent_iterations: 5
  max_loop_iterations: 3
  approval_before_tools: [write_file, http_request]
  gate_timeout: true
  http_hosts: ["*.example.com"]
"""

WRITER = """\
block: writer
kind: agent
model: {provider: anthropic, name: claude}
tools: [write_file]
prompt: {user: write}
outputs:
  done: {type: string}
"""

BRIEF = """\
block: brief
kind: agent
model: small
max_iterations: 8
prompt: {user: write}
outputs:
  done: {type: string}
"""

FETCH = """\
block: fetch
kind: tool
tool: http_request
inputs:
  url: {type: string}
outputs:
  status: {type: integer}
"""

FLOW = """\
flow: f
steps:
  - id: ok
    approval: {message: go}
  - id: write
    uses: writer
  - id: get
    uses: fetch
    with: {url: "https://evil.test/x"}
  - id: again
    loop:
      max_iterations: 9
      steps:
        - id: w2
          uses: writer
          require_approval: {timeout: 1h, on_reject: fail}
          max_visits: 4
  - id: safe
    uses: fetch
    require_approval: {timeout: 1h, on_reject: fail}
    with: {url: "https://api.example.com/x"}
  - id: brief
    uses: brief
"""


def _yard(root: Path, config: str = POLICY) -> Path:
    for name, text in {
        "blockyard.yaml": config,
        "blocks/writer.yaml": WRITER,
        "blocks/fetch.yaml": FETCH,
        "blocks/brief.yaml": BRIEF,
        "flows/f.yaml": FLOW,
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _policy_problems(root: Path) -> list[tuple[str, int, int, str]]:
    project = load_project(root)
    assert project.diagnostics == []
    return [
        (d.file, d.line, d.col, d.code)
        for d in semantic.check_project(project)
        if d.code.startswith("BY81")
    ]


def test_every_policy_rule_reports_at_the_offending_line(tmp_path: Path) -> None:
    assert _policy_problems(_yard(tmp_path)) == [
        ("blocks/brief.yaml", 4, 17, "BY812"),  # max_iterations 8 > 5
        ("blocks/writer.yaml", 2, 7, "BY812"),  # no max_iterations: the default, 10 > 5
        ("blocks/writer.yaml", 3, 19, "BY810"),  # anthropic
        ("blocks/writer.yaml", 3, 36, "BY811"),  # claude
        ("blockyard.yaml", 2, 37, "BY811"),  # gpt-4o is not gpt-4o-mini*
        ("blockyard.yaml", 5, 36, "BY816"),  # evil.test in http.allowed_hosts
        ("flows/f.yaml", 4, 5, "BY815"),  # the approval step has no timeout
        (
            "flows/f.yaml",
            8,
            5,
            "BY814",
        ),  # http_request without a gate (`write` follows the `ok` gate: allowed)
        ("flows/f.yaml", 9, 17, "BY816"),  # a literal URL on evil.test
        ("flows/f.yaml", 12, 23, "BY813"),  # loop of 9 > 3
        ("flows/f.yaml", 17, 23, "BY813"),  # max_visits 4 > 3
    ]


def test_no_policy_no_findings(tmp_path: Path) -> None:
    config = POLICY.split("policy:")[0]
    assert _policy_problems(_yard(tmp_path, config)) == []
