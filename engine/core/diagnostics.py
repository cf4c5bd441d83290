"""Diagnostics: one problem at one place, with a stable code."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Diagnostic:
    """A problem found in a file. Sorted by file, line, column, then code."""

    file: str
    line: int
    col: int
    code: str
    message: str
    severity: Severity = field(default="error", compare=False)

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.severity} {self.code} {self.message}"

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest candidate, or '' when nothing is close."""
    matches = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""
