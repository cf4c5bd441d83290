"""The reporters: exact text, JSON, GitHub workflow commands (with their escaping rules) and SARIF."""

from __future__ import annotations

import io
import json

import pytest

from engine.core.diagnostics import Diagnostic
from engine.validate.codes import all_codes
from engine.validate.report import REPORTERS, Report

TWO = Report(
    [
        Diagnostic("flows/a.yaml", 3, 5, "BY102", "unknown key 'x'"),
        Diagnostic("flows/b.yaml", 1, 1, "BY104", "50% done,\r\nthen: more", "warning"),
    ],
    files_checked=4,
)
CLEAN = Report([], files_checked=3)


def render(fmt: str, report: Report) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    REPORTERS[fmt](report, out, err)
    return out.getvalue(), err.getvalue()


def test_text_lines_and_summary_on_stderr() -> None:
    out, err = render("text", TWO)
    assert out == (
        "flows/a.yaml:3:5: error BY102 unknown key 'x'\n"
        "flows/b.yaml:1:1: warning BY104 50% done,\r\nthen: more\n"
    )
    assert err == "1 error and 1 warning in 2 files (4 checked)\n"


@pytest.mark.parametrize(
    ("report", "summary"),
    [
        (CLEAN, "no problems in 3 files"),
        (Report([], 1), "no problems in 1 file"),
        (
            Report([Diagnostic("a.yaml", 1, 1, "BY001", "m")] * 1, 1),
            "1 error in 1 file (1 checked)",
        ),
        (
            Report(
                [
                    Diagnostic("a.yaml", 1, 1, "BY001", "m"),
                    Diagnostic("a.yaml", 2, 1, "BY001", "m"),
                ],
                7,
            ),
            "2 errors in 1 file (7 checked)",
        ),
        (
            Report([Diagnostic("a.yaml", 1, 1, "BY001", "m", "warning")], 2),
            "1 warning in 1 file (2 checked)",
        ),
    ],
)
def test_summary_wording(report: Report, summary: str) -> None:
    assert report.summary() == summary


def test_json_is_a_list_of_plain_objects_and_nothing_on_stderr() -> None:
    out, err = render("json", TWO)
    assert json.loads(out) == [
        {
            "file": "flows/a.yaml",
            "line": 3,
            "col": 5,
            "severity": "error",
            "code": "BY102",
            "message": "unknown key 'x'",
        },
        {
            "file": "flows/b.yaml",
            "line": 1,
            "col": 1,
            "severity": "warning",
            "code": "BY104",
            "message": "50% done,\r\nthen: more",
        },
    ]
    assert err == ""
    assert json.loads(render("json", CLEAN)[0]) == []


def test_github_escapes_data_and_properties() -> None:
    out, _ = render("github", TWO)
    assert out.splitlines() == [
        "::error file=flows/a.yaml,line=3,col=5,title=BY102::unknown key 'x'",
        "::warning file=flows/b.yaml,line=1,col=1,title=BY104::50%25 done,%0D%0Athen: more",
        "::error::blockyard validate: 2 problems in 2 files",
    ]


def test_github_escapes_commas_and_colons_in_file_names() -> None:
    report = Report([Diagnostic("flows/a,b:c%.yaml", 2, 4, "BY002", "x")], 1)
    out, _ = render("github", report)
    assert out.splitlines()[0] == "::error file=flows/a%2Cb%3Ac%25.yaml,line=2,col=4,title=BY002::x"


def test_github_summary_is_a_notice_when_there_are_no_errors() -> None:
    assert render("github", CLEAN)[0] == "::notice::blockyard validate: no problems in 3 files\n"
    warned = Report([Diagnostic("a.yaml", 1, 1, "BY104", "m", "warning")], 2)
    assert render("github", warned)[0].splitlines()[-1] == (
        "::notice::blockyard validate: 1 warning in 1 file (2 checked)"
    )


def test_sarif_results_point_at_rules_from_the_registry() -> None:
    out, err = render("sarif", TWO)
    document = json.loads(out)
    assert err == ""
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "blockyard"
    assert [rule["id"] for rule in driver["rules"]] == list(all_codes())
    assert all(rule["shortDescription"]["text"] for rule in driver["rules"])
    first, second = run["results"]
    assert first == {
        "ruleId": "BY102",
        "ruleIndex": list(all_codes()).index("BY102"),
        "level": "error",
        "message": {"text": "unknown key 'x'"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "flows/a.yaml"},
                    "region": {"startLine": 3, "startColumn": 5},
                }
            }
        ],
    }
    assert second["level"] == "warning"


def test_sarif_adds_a_rule_for_an_unregistered_code() -> None:
    report = Report([Diagnostic("a.yaml", 1, 1, "BY999", "from a plug-in")], 1)
    (run,) = json.loads(render("sarif", report)[0])["runs"]
    (result,) = run["results"]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "BY999"


def test_every_reporter_is_registered_by_its_cli_name() -> None:
    assert set(REPORTERS) == {"text", "json", "github", "sarif"}
