"""Reporters: the same diagnostics as text, JSON, GitHub workflow commands or SARIF, chosen by name.

Every reporter receives the complete, sorted list first (problems of every file at once) and
writes it in one go, so the formats never disagree about what was found.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from engine.core.diagnostics import Diagnostic
from engine.core.version import __version__
from engine.validate.codes import all_codes


@dataclass(frozen=True)
class Report:
    """What one `validate` found: sorted diagnostics and how many files were checked."""

    diagnostics: list[Diagnostic]
    files_checked: int

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "warning")

    @property
    def files_with_problems(self) -> int:
        return len({d.file for d in self.diagnostics})

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def summary(self) -> str:
        """One line: 'no problems in 12 files' or '3 errors and 1 warning in 2 files (12 checked)'."""
        checked = plural(self.files_checked, "file")
        if not self.diagnostics:
            return f"no problems in {checked}"
        counts = " and ".join(
            plural(n, word) for n, word in ((self.errors, "error"), (self.warnings, "warning")) if n
        )
        return (
            f"{counts} in {plural(self.files_with_problems, 'file')} ({self.files_checked} checked)"
        )


Reporter = Callable[[Report, TextIO, TextIO], None]


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def text(report: Report, out: TextIO, err: TextIO) -> None:
    """`file:line:col: severity CODE message`, one per line; the summary goes to stderr."""
    out.writelines(d.format() + "\n" for d in report.diagnostics)
    out.flush()  # keep the summary after the problems when both streams go to one terminal
    err.write(report.summary() + "\n")


def as_json(report: Report, out: TextIO, err: TextIO) -> None:
    """A JSON list of {file, line, col, severity, code, message}; nothing else on stdout."""
    json.dump([d.as_dict() for d in report.diagnostics], out, indent=2, ensure_ascii=False)
    out.write("\n")


def github(report: Report, out: TextIO, err: TextIO) -> None:
    """GitHub Actions workflow commands: one annotation per problem, then a summary annotation.

    GitHub shows only the first few annotations of a step, so the last line always says how many
    problems there were in total.
    """
    for d in report.diagnostics:
        props = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("file", d.file),
                ("line", d.line),
                ("col", d.col),
                ("title", d.code),
            )
        )
        out.write(f"::{d.severity} {props}::{_escape_data(d.message)}\n")
    if report.ok:
        out.write(f"::notice::blockyard validate: {_escape_data(report.summary())}\n")
    else:
        problems = plural(len(report.diagnostics), "problem")
        out.write(
            f"::error::blockyard validate: {problems} in {plural(report.files_with_problems, 'file')}\n"
        )


def _escape_data(value: str) -> str:
    # the order matters: '%' first, or the escapes themselves would be escaped again
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif(report: Report, out: TextIO, err: TextIO) -> None:
    """SARIF 2.1.0 (GitHub code scanning and other static-analysis viewers): rules are the code registry."""
    registry = dict(all_codes())
    for d in report.diagnostics:  # a code missing from the registry still needs a rule to point at
        registry.setdefault(d.code, d.code)
    index = {code: i for i, code in enumerate(registry)}
    rules = [{"id": code, "shortDescription": {"text": title}} for code, title in registry.items()]
    results = [
        {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": d.severity,
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": d.file},
                        "region": {"startLine": d.line, "startColumn": d.col},
                    }
                }
            ],
        }
        for d in report.diagnostics
    ]
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "blockyard",
                        "version": __version__,
                        "informationUri": "https://blockyard.dev",
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    json.dump(document, out, indent=2, ensure_ascii=False)
    out.write("\n")


REPORTERS: dict[str, Reporter] = {"text": text, "json": as_json, "github": github, "sarif": sarif}
